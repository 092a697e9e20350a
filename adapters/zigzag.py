"""The ``zigzag`` compute backend: each GEMM or convolution run through ZigZag 3.9.1 (``pip install
'stratasim[zigzag]'``).

Devices are the example accelerators ZigZag ships, each with its own hardware and mapping yaml from the
installed package (``zigzag/inputs``): ``tpu-like`` (a 32x32 weight-stationary array, ``tpu_like.yaml``),
``edge-tpu-like``, ``tesla-npu-like``, ``ascend-like`` and ``meta-prototype-like``.

Operators become one-layer workloads in ZigZag's yaml format, passed as data, at ZigZag's default precisions
(8-bit inputs, weights and final outputs, 16-bit partial sums, as its ONNX parser assumes; the examples are
8-bit accelerators, so the operator's dtype does not change the price):

* a GEMM ``[M, K, N]`` is ``O[d][k] += I[d][c] * W[c][k]`` with D = M, C = K, K = N (ZigZag's names); a batched
  one ``[B, M, K, N]`` runs once and costs B times that;
* a convolution is ``O[b][k][oy][ox] += W[k][c][fy][fx] * I[b][c][iy][ix]`` with ``ix = stride·ox + fx`` (and
  likewise ``iy``), unpadded, B = N.

``zigzag.api.get_hardware_performance_zigzag`` searches the mappings for the lowest latency (its defaults:
LOMA, ``lpf_limit`` 6) with its outputs dumped into a temporary directory. ``duration_ps`` is its latency
(``latency_total2``: compute, stalls, loading the first tiles, offloading the last, systolic drain) at 1 GHz:
ZigZag counts cycles and its examples name no clock. ``energy_pj`` is its total energy. ``bound`` is
``COMPUTE`` when the compute cycles are at least the rest of the latency, ``MEMORY`` otherwise. The basis is
``DATASHEET``: an analytical model of an accelerator described by its architecture, nothing measured.

Quirks handled: zigzag-dse 3.9.1 imports ``six`` without declaring it (the extra installs it); it calls
``logging.basicConfig(level=INFO)`` (its handlers are removed after each run and its logs below ERROR
silenced); its failures (``ValueError`` on a workload it rejects, assertions) come back as an error naming
what it raised and the last thing it logged.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from stratasim.adapters._backend import ToolBackend
from stratasim.adapters._tool import ToolFailure, contained, load
from stratasim.kernel.operator_shapes import ConvShape, GemmShape
from stratasim.v1 import compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["from_section", "ZigZagCompute", "EXAMPLES", "workload"]

_PS_PER_CYCLE = 1000  # 1 GHz
# Device name -> (hardware yaml, mapping yaml) under zigzag/inputs.
EXAMPLES: dict[str, tuple[str, str]] = {
    "tpu-like": ("tpu_like.yaml", "tpu_like.yaml"),
    "edge-tpu-like": ("edge_tpu_like.yaml", "edge_tpu_like.yaml"),
    "tesla-npu-like": ("tesla_npu_like.yaml", "tesla_npu_like.yaml"),
    "ascend-like": ("ascend_like.yaml", "ascend_like.yaml"),
    "meta-prototype-like": ("meta_prototype.yaml", "meta_prototype_like.yaml"),
}
"""ZigZag's example accelerators offered as devices."""

_PRECISION = {"I": 8, "W": 8, "O": 16, "O_final": 8}


def workload(layer: GemmShape | ConvShape) -> list[dict[str, Any]]:
    """ZigZag's one-layer workload (its yaml format, as data) of ``layer``; a GEMM's batch is left out."""
    if isinstance(layer, GemmShape):
        node: dict[str, Any] = {
            "operator_type": "Gemm",
            "equation": "O[d][k]+=I[d][c]*W[c][k]",
            "loop_dims": ["D", "C", "K"],
            "loop_sizes": [layer.m, layer.k, layer.n],
        }
    else:
        node = {
            "operator_type": "Conv",
            "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
            "dimension_relations": [f"ix={layer.stride}*ox+1*fx", f"iy={layer.stride}*oy+1*fy"],
            "loop_dims": ["B", "K", "C", "OY", "OX", "FY", "FX"],
            "loop_sizes": [layer.n, layer.k, layer.c, layer.p, layer.q, layer.r, layer.s],
        }
    return [{"id": 0, "name": "layer", **node, "operand_precision": dict(_PRECISION)}]


class ZigZagCompute(ToolBackend[str]):
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` running ZigZag on each distinct operator (cached per
    instance) on one of its example accelerators."""

    name = "zigzag"
    tool = "ZigZag"
    extra = "zigzag"

    def devices(self) -> list[str]:
        """ZigZag's example accelerators offered."""
        return sorted(EXAMPLES)

    def _device(self, name: str) -> str:
        key = name.strip().lower()
        if key not in EXAMPLES:
            raise self._unknown_device(name)
        return key

    def _load(self) -> ModuleType:
        return load("zigzag.api", self.name, self.tool, self.extra)

    def _price(
        self, tool: ModuleType, layer: GemmShape | ConvShape, device: str, op: compute_pb2.OperatorDesc, index: int
    ) -> compute_pb2.OperatorCost:
        hardware, mapping = EXAMPLES[device]
        inputs = Path(str(tool.__file__)).parent / "inputs"  # zigzag/api.py -> zigzag/inputs
        with tempfile.TemporaryDirectory(prefix="stratasim-zigzag-") as tmp, contained("zigzag"):
            energy, latency, cmes = tool.get_hardware_performance_zigzag(
                workload(layer),
                str(inputs / "hardware" / hardware),
                str(inputs / "mapping" / mapping),
                dump_folder=tmp,
                loma_show_progress_bar=False,
            )
            compute = _compute_cycles(cmes)
        batch = layer.batch if isinstance(layer, GemmShape) else 1
        return compute_pb2.OperatorCost(
            duration_ps=batch * round(latency) * _PS_PER_CYCLE,
            energy_pj=batch * float(energy),
            bound=compute_pb2.COMPUTE if 2 * compute >= latency else compute_pb2.MEMORY,
            basis=compute_pb2.DATASHEET,
        )


def _compute_cycles(cmes: Any) -> float:
    """The compute cycles (ideal temporal cycles of the chosen spatial mapping) of the one layer's evaluation."""
    try:
        return float(cmes[0][1][0][0].ideal_temporal_cycle)
    except (IndexError, TypeError, AttributeError) as exc:
        raise ToolFailure(f"its result holds no layer evaluation ({exc})") from None


def from_section(section: BackendSection | None = None) -> ZigZagCompute:
    """The backend the registry builds from the study's compute section (None: its defaults).

    It reads no key of it."""
    return ZigZagCompute()
