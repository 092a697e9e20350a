"""The adapters' costs say their basis: SCALE-Sim and ZigZag model accelerators described by their architecture,
so nothing measured prices them (``DATASHEET``). Run without either tool, on stand-ins that answer as they do."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stratasim.adapters.scalesim import ScaleSimCompute
from stratasim.adapters.zigzag import ZigZagCompute
from stratasim.kernel.contracts import ComputeBackend
from stratasim.v1 import compute_pb2
from tests.adapters.test_adapter_errors import GEMM, _stand_in


class _ScaleSim:
    """SCALE-Sim's run writing its two reports: 100 cycles, no stalls, 10 words at each SRAM and DRAM column."""

    def __init__(self, **_: Any) -> None:
        pass

    def run_scale(self, top_path: str) -> None:
        out = Path(top_path) / "stratasim"
        out.mkdir(parents=True)
        (out / "COMPUTE_REPORT.csv").write_text("layer, prefetch, total, stall\n0, 120, 100, 0\n")
        (out / "DETAILED_ACCESS_REPORT.csv").write_text("head\n" + ", ".join(["10"] * 19) + "\n")


def _zigzag(*_: Any, **__: Any) -> tuple[float, float, Any]:
    """ZigZag's answer: energy, latency and the one layer's evaluation (its ideal temporal cycles)."""
    return 5.0, 100.0, [[None, [[SimpleNamespace(ideal_temporal_cycle=80.0)]]]]


@pytest.mark.parametrize(
    ("backend", "module", "attributes"),
    [
        (ScaleSimCompute, "scalesim.scale_sim", {"scalesim": _ScaleSim}),
        (ZigZagCompute, "zigzag.api", {"get_hardware_performance_zigzag": _zigzag, "__file__": "/x/zigzag/api.py"}),
    ],
    ids=["scalesim", "zigzag"],
)
def test_an_adapters_cost_is_datasheet(
    monkeypatch: pytest.MonkeyPatch, backend: type[ComputeBackend], module: str, attributes: dict[str, Any]
) -> None:
    _stand_in(monkeypatch, module, **attributes)
    built = backend()
    response = built.estimate(compute_pb2.EstimateRequest(device=built.devices()[0], ops=[GEMM]))
    assert not response.HasField("error"), response.error.message
    (cost,) = response.costs
    assert cost.duration_ps == 100_000 and cost.basis == compute_pb2.DATASHEET
