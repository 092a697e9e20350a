"""The layers the adapters are checked on, and the stored results of SCALE-Sim and ZigZag on them.

SCALE-Sim: 4 GEMMs and 4 convolutions (scaled-down ResNet and AlexNet layers, a few seconds each) on 32x32 and
128x128 arrays in every dataflow, and on 32x32 arrays in user-bandwidth mode (4 words per cycle per DRAM port). ZigZag: GEMMs and ResNet convolutions on its TPU-like example. The results
live in ``reference_cycles.json``, written by ``python -m tests.adapters.regenerate``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2

__all__ = [
    "REFERENCE",
    "SCALESIM_LAYERS",
    "SCALESIM_DEVICES",
    "SCALESIM_USER_DEVICES",
    "ZIGZAG_LAYERS",
    "ZIGZAG_DEVICE",
    "op_of",
    "reference",
]

REFERENCE = Path(__file__).with_name("reference_cycles.json")

# name -> (kind, arguments of stratasim.kernel.operators.gemm / conv2d)
SCALESIM_LAYERS: dict[str, tuple[str, dict[str, int]]] = {
    "gemm-64x64x64": ("gemm", {"m": 64, "k": 64, "n": 64}),
    "gemm-128x256x64": ("gemm", {"m": 128, "k": 256, "n": 64}),
    "gemm-100x300x50": ("gemm", {"m": 100, "k": 300, "n": 50}),
    "gemm-16x512x128": ("gemm", {"m": 16, "k": 512, "n": 128}),
    "resnet-3x3-16to16-14x14": ("conv", {"n": 1, "k": 16, "c": 16, "p": 14, "q": 14, "r": 3, "s": 3}),
    "resnet-conv1-7x7s2-3to32-16x16": (
        "conv",
        {"n": 1, "k": 32, "c": 3, "p": 16, "q": 16, "r": 7, "s": 7, "stride": 2},
    ),
    "resnet-1x1-64to64-14x14": ("conv", {"n": 1, "k": 64, "c": 64, "p": 14, "q": 14, "r": 1, "s": 1}),
    "alexnet-5x5-24to32-9x9": ("conv", {"n": 1, "k": 32, "c": 24, "p": 9, "q": 9, "r": 5, "s": 5}),
}
SCALESIM_DEVICES = [f"systolic-{n}x{n}-{d}" for n in (32, 128) for d in ("os", "ws", "is")]
# SCALE-Sim's user-bandwidth mode: DRAM ports of 4 words per cycle per SRAM.
SCALESIM_USER_DEVICES = [f"systolic-32x32-{d}-bw4" for d in ("os", "ws", "is")]

ZIGZAG_DEVICE = "tpu-like"
ZIGZAG_LAYERS: dict[str, tuple[str, dict[str, int]]] = {
    "gemm-64x64x64": ("gemm", {"m": 64, "k": 64, "n": 64}),
    "gemm-256x512x256": ("gemm", {"m": 256, "k": 512, "n": 256}),
    "bert-ffn-512x768x768": ("gemm", {"m": 512, "k": 768, "n": 768}),
    "resnet18-3x3-64to64-56x56": ("conv", {"n": 1, "k": 64, "c": 64, "p": 56, "q": 56, "r": 3, "s": 3}),
    "resnet18-3x3-128to128-28x28": ("conv", {"n": 1, "k": 128, "c": 128, "p": 28, "q": 28, "r": 3, "s": 3}),
    "resnet50-1x1-256to64-56x56": ("conv", {"n": 1, "k": 64, "c": 256, "p": 56, "q": 56, "r": 1, "s": 1}),
}


def op_of(name: str, layer: tuple[str, dict[str, int]]) -> compute_pb2.OperatorDesc:
    """The int8 operator of a layer of the tables above."""
    kind, args = layer
    if kind == "gemm":
        return operators.gemm(**args, dtype=compute_pb2.INT8, name=name)
    return operators.conv2d(**args, dtype=compute_pb2.INT8, name=name)


def reference() -> dict[str, Any]:
    """The stored results: ``{"scalesim": {...}, "zigzag": {...}}`` with the tool versions and the values."""
    stored: dict[str, Any] = json.loads(REFERENCE.read_text())
    return stored
