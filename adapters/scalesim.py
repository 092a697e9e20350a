"""The ``scalesim`` compute backend: each GEMM or convolution run through SCALE-Sim 3.0.0 (``pip install
'stratasim[scalesim]'``).

Devices are ``systolic-<R>x<C>-<os|ws|is>``: an R x C array with SCALE-Sim's example configuration
(``configs/scale.cfg``: 64 kB ifmap, filter and ofmap SRAMs, 1-byte words), its bandwidth computed
(``InterfaceBandwidth = CALC``, so no stalls), as the ``timeloop`` backend's presets of the same names; with
``-bw<B>`` (``systolic-32x32-ws-bw10``) SCALE-Sim's user-bandwidth mode instead (``InterfaceBandwidth = USER``):
each SRAM reaches DRAM through a port of B words per cycle (3.0.0 reads the ifmap and filter ports' bandwidth from
``IfmapSRAMBankBandwidth`` and ``FilterSRAMBankBandwidth``, the ofmap's from ``Bandwidth``: all three are B).

Operators become one-layer topologies written, with the config, into a temporary directory:

* a GEMM ``[M, K, N]`` is SCALE-Sim's GEMM row ``M, N, K`` (``-i gemm``: K is the reduction); a batched one
  ``[B, M, K, N]`` runs once and costs B times that;
* a convolution of one image is its conv row (IFMAP H and W = (P - 1)·stride + R and (Q - 1)·stride + S, filter
  R x S, C channels, K filters, the stride); one of N > 1 images is the GEMM ``N·P·Q, K, C·R·S`` SCALE-Sim
  would lower it to, as SCALE-Sim has no batch.

``duration_ps`` is the report's ``Total Cycles`` (compute cycles plus stalls, after the first prefetch) at
1 GHz: SCALE-Sim counts cycles and has no clock. In user-bandwidth mode it is ``Total Cycles (incl. prefetch)``,
from the first DRAM read to the last DRAM write: with memory bounded, loading the first tiles and draining the
last outputs take time too. SCALE-Sim reports no energy (``energy_pj`` is 0); traffic is
the SRAM and DRAM accesses of its detailed report, in words times the operator's element size. The basis is
``DATASHEET``: a cycle model of an array described by its architecture, nothing measured.

Quirks handled: SCALE-Sim 3.0.0 breaks under numpy 2.4 (refused with the pin to install); a layer whose name
contains ``DP`` is taken as depthwise (layers are always named ``layer``); it prints and calls ``exit()`` on
errors (silenced, and turned into an error naming what it printed); it builds its traces as dense matrices of
cycles x array edge, so a layer whose traces would exceed ``max_trace_words`` is refused rather than run out of
memory.
"""

from __future__ import annotations

import csv
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from stratasim.adapters._backend import ToolBackend
from stratasim.adapters._tool import ToolFailure, contained, load
from stratasim.compute_layer.requests import Rejected, element_bytes, label
from stratasim.compute_layer.timeloop.problem import conv2d, gemm
from stratasim.compute_layer.timeloop.scalesim import scalesim_cycles
from stratasim.kernel.operator_shapes import ConvShape, GemmShape
from stratasim.v1 import common_pb2, compute_pb2

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection

__all__ = ["from_section", "ScaleSimCompute", "SystolicArray", "CONFIG"]

_PS_PER_CYCLE = 1000  # 1 GHz
_RUN = "stratasim"
_NAME = re.compile(r"systolic-(\d+)x(\d+)-(os|ws|is)(?:-bw(\d+))?")
_LISTED = [f"systolic-{n}x{n}-{d}" for n in (32, 128) for d in ("os", "ws", "is")]

CONFIG = """\
[general]
run_name = {run}

[run_presets]
InterfaceBandwidth = {mode}
UseRamulatorTrace = False

[architecture_presets]
ArrayHeight = {rows}
ArrayWidth = {cols}
IfmapSramSzkB = 64
FilterSramSzkB = 64
OfmapSramSzkB = 64
IfmapOffset = 0
FilterOffset = 10000000
OfmapOffset = 20000000
Dataflow = {dataflow}
ReadRequestBuffer = 32
WriteRequestBuffer = 32
Bandwidth = {bandwidth}

[layout]
IfmapCustomLayout = False
IfmapSRAMBankBandwidth = {bandwidth}
IfmapSRAMBankNum = {banks}
IfmapSRAMBankPort = 2
FilterCustomLayout = False
FilterSRAMBankBandwidth = {bandwidth}
FilterSRAMBankNum = {banks}
FilterSRAMBankPort = 2

[sparsity]
SparsitySupport = false
"""
"""SCALE-Sim's example configuration with the array's size, dataflow and bandwidth mode left to fill in."""


@dataclass(frozen=True)
class SystolicArray:
    """A ``rows x cols`` array with a dataflow (os, ws or is) and, in user-bandwidth mode, each SRAM's DRAM port's
    words per cycle (None: SCALE-Sim computes the bandwidth, memory never stalls)."""

    rows: int
    cols: int
    dataflow: str
    bandwidth: int | None = None

    def config(self) -> str:
        """SCALE-Sim's configuration file of this array."""
        if self.bandwidth is None:  # the example configuration's own figures
            settings = {"mode": "CALC", "bandwidth": 10, "banks": 10}
        else:  # one bank, so that the bank bandwidth is the port's (3.0.0 asserts it divides)
            settings = {"mode": "USER", "bandwidth": self.bandwidth, "banks": 1}
        return CONFIG.format(run=_RUN, rows=self.rows, cols=self.cols, dataflow=self.dataflow, **settings)


class ScaleSimCompute(ToolBackend[SystolicArray]):
    """A :class:`~stratasim.kernel.contracts.ComputeBackend` running SCALE-Sim on each distinct operator (cached per
    instance). ``max_trace_words`` bounds the float64 trace cells SCALE-Sim may build for one layer
    (cycles x (rows + 2·cols)); the default, 60 million, is about 0.5 GB."""

    name = "scalesim"
    tool = "SCALE-Sim"
    extra = "scalesim"

    def __init__(self, max_trace_words: int = 60_000_000) -> None:
        super().__init__()
        self._max_trace_words = max_trace_words

    def devices(self) -> list[str]:
        """The arrays the ``timeloop`` backend lists as presets; any ``systolic-<R>x<C>-<os|ws|is>`` is priced."""
        return sorted(_LISTED)

    def _device(self, name: str) -> SystolicArray:
        match = _NAME.fullmatch(name.strip().lower())
        if match is None or int(match[1]) == 0 or int(match[2]) == 0 or match[4] == "0":
            raise self._unknown_device(name, "systolic-<R>x<C>-<os|ws|is>[-bw<B>]")
        return SystolicArray(int(match[1]), int(match[2]), match[3], None if match[4] is None else int(match[4]))

    def _load(self) -> ModuleType:
        tool = load("scalesim.scale_sim", self.name, self.tool, self.extra)
        numpy = load("numpy", self.name, "numpy", self.extra)
        major, minor = (int(part) for part in numpy.__version__.split(".")[:2])
        if (major, minor) >= (2, 4):
            message = (
                f"SCALE-Sim 3.0.0 fails under numpy 2.4 and later (numpy {numpy.__version__} is installed): "
                f"pip install 'stratasim[{self.extra}]', which pins numpy<2.4"
            )
            raise Rejected(common_pb2.Error.FAILED_PRECONDITION, message, "backend")
        return tool

    def _price(
        self,
        tool: ModuleType,
        layer: GemmShape | ConvShape,
        device: SystolicArray,
        op: compute_pb2.OperatorDesc,
        index: int,
    ) -> compute_pb2.OperatorCost:
        self._check_size(layer, device, op, index)
        size = element_bytes(op, index)
        header, row, batch, is_gemm = _topology(layer)
        with tempfile.TemporaryDirectory(prefix="stratasim-scalesim-") as tmp:
            root = Path(tmp)
            (root / "scale.cfg").write_text(device.config())
            (root / "topology.csv").write_text(f"{header},\n{row},\n")
            (root / "layout.csv").write_text("Layer name,\n")  # custom layouts are off: no rows needed
            with contained("scalesim"):
                sim = tool.scalesim(
                    save_disk_space=True,
                    verbose=False,
                    config=str(root / "scale.cfg"),
                    topology=str(root / "topology.csv"),
                    layout=str(root / "layout.csv"),
                    input_type_gemm=is_gemm,
                )
                sim.run_scale(top_path=str(root / "out"))
            compute = _report_row(root / "out" / _RUN / "COMPUTE_REPORT.csv")
            access = _report_row(root / "out" / _RUN / "DETAILED_ACCESS_REPORT.csv")
        # Total Cycles (incl. prefetch), Total Cycles, Stall Cycles
        cycles = int(float(compute[2 if device.bandwidth is None else 1]))
        # Memory bound when the array stalled, or (user bandwidth) loading and draining added cycles.
        memory = int(float(compute[3])) > 0 or cycles > int(float(compute[2]))
        sram = sum(int(float(access[i])) for i in (3, 6, 9))
        dram = sum(int(float(access[i])) for i in (12, 15, 18))
        return compute_pb2.OperatorCost(
            duration_ps=batch * cycles * _PS_PER_CYCLE,
            energy_pj=0.0,
            traffic=[
                compute_pb2.MemoryTraffic(level="sram", bytes=batch * sram * size),
                compute_pb2.MemoryTraffic(level="dram", bytes=batch * dram * size),
            ],
            bound=compute_pb2.MEMORY if memory else compute_pb2.COMPUTE,
            basis=compute_pb2.DATASHEET,
        )

    def _check_size(
        self, layer: GemmShape | ConvShape, device: SystolicArray, op: compute_pb2.OperatorDesc, index: int
    ) -> None:
        if isinstance(layer, GemmShape):
            problem = gemm(layer.m, layer.k, layer.n)
        else:
            problem = conv2d(layer.n, layer.k, layer.c, layer.p, layer.q, layer.r, layer.s, stride=layer.stride)
        cycles = scalesim_cycles(problem, device.rows, device.cols, device.dataflow)
        words = cycles * (device.rows + 2 * device.cols)
        if words > self._max_trace_words:
            message = (
                f"{label(op, index)}: SCALE-Sim would trace {cycles} cycles on this array, {words} words of "
                f"trace matrices, more than max_trace_words={self._max_trace_words}; price it with the timeloop "
                "backend, which follows SCALE-Sim's compute model analytically"
            )
            raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}]")


def _topology(layer: GemmShape | ConvShape) -> tuple[str, str, int, bool]:
    """(header, row, batch multiplier, whether it is a GEMM topology) of SCALE-Sim's one-layer topology file."""
    if isinstance(layer, GemmShape):
        return "Layer, M, N, K", f"layer, {layer.m}, {layer.n}, {layer.k}", layer.batch, True
    if layer.n > 1:
        m, k = layer.n * layer.p * layer.q, layer.c * layer.r * layer.s
        return "Layer, M, N, K", f"layer, {m}, {layer.k}, {k}", 1, True
    header = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides"
    row = f"layer, {layer.height}, {layer.width}, {layer.r}, {layer.s}, {layer.c}, {layer.k}, {layer.stride}"
    return header, row, 1, False


def _report_row(path: Path) -> list[str]:
    """The one layer's row of a SCALE-Sim report (fields stripped)."""
    if not path.is_file():
        raise ToolFailure(f"it wrote no {path.name}")
    with path.open(newline="") as handle:
        rows = [[field.strip() for field in row] for row in csv.reader(handle) if row]
    if len(rows) < 2:
        raise ToolFailure(f"its {path.name} has no layer row")
    return rows[1]


def from_section(section: BackendSection | None = None) -> ScaleSimCompute:
    """The backend the registry builds from the study's compute section (None: its defaults).

    It reads no key of it."""
    return ScaleSimCompute()
