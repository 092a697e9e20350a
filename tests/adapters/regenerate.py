"""Rewrite ``reference_cycles.json`` by running SCALE-Sim and ZigZag (through the adapters) on the layers.

python -m tests.adapters.regenerate        # in an environment with .[scalesim,zigzag] installed
"""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

from stratasim.adapters.scalesim import ScaleSimCompute
from stratasim.adapters.zigzag import ZigZagCompute
from stratasim.kernel.contracts import ComputeBackend
from stratasim.v1 import compute_pb2
from tests.adapters.layers import (
    REFERENCE,
    SCALESIM_DEVICES,
    SCALESIM_LAYERS,
    SCALESIM_USER_DEVICES,
    ZIGZAG_DEVICE,
    ZIGZAG_LAYERS,
    op_of,
)


def _cost(backend: ComputeBackend, device: str, op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorCost:
    response = backend.estimate(compute_pb2.EstimateRequest(device=device, ops=[op]))
    if response.HasField("error"):
        raise SystemExit(f"{backend.name} on {device}: {response.error.message}")
    return response.costs[0]


def measure() -> dict[str, Any]:
    """Every stored value, measured afresh."""
    scalesim, zigzag = ScaleSimCompute(), ZigZagCompute()
    cycles = {
        device: {
            name: _cost(scalesim, device, op_of(name, layer)).duration_ps // 1000
            for name, layer in SCALESIM_LAYERS.items()
        }
        for device in SCALESIM_DEVICES
    }
    user = {
        device: {
            name: _cost(scalesim, device, op_of(name, layer)).duration_ps // 1000
            for name, layer in SCALESIM_LAYERS.items()
        }
        for device in SCALESIM_USER_DEVICES
    }
    latency: dict[str, dict[str, float]] = {}
    for name, layer in ZIGZAG_LAYERS.items():
        cost = _cost(zigzag, ZIGZAG_DEVICE, op_of(name, layer))
        latency[name] = {"latency_cycles": cost.duration_ps // 1000, "energy_pj": cost.energy_pj}
    return {
        "scalesim": {
            "version": version("scalesim"),
            "numpy": version("numpy"),
            "clock_hz": 10**9,
            "report": "COMPUTE_REPORT.csv, Total Cycles",
            "cycles": cycles,
            "user_report": "COMPUTE_REPORT.csv, Total Cycles (incl. prefetch)",
            "user_cycles": user,
        },
        "zigzag": {
            "version": version("zigzag-dse"),
            "device": ZIGZAG_DEVICE,
            "clock_hz": 10**9,
            "result": "latency_total2 (cycles), energy_total (pJ)",
            "layers": latency,
        },
    }


if __name__ == "__main__":
    REFERENCE.write_text(json.dumps(measure(), indent=1) + "\n")
    print(f"wrote {REFERENCE}")
