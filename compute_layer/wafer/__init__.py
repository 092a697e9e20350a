"""PALM-style tiled / wafer-scale accelerators and the ``wafer`` compute backend.

A wafer (:mod:`.accelerator`, with PALM's Table VI as the ``palm-wafer`` preset) is a mesh of tiles of cores
with edge-shared DRAM; an operator is split over a group of its cores (:mod:`.split`); PALM's Algorithm 1
picks each core's SRAM strategy and so its DRAM traffic (:mod:`.sram`); that traffic contends for the edge
DRAM channels and the NoC links leading to them (:mod:`.contention`); :mod:`.model` searches the split and
:mod:`.backend` is the ComputeBackend. ``docs/validation/palm-wafer.md`` gives the equations and their sources.
"""

from stratasim.compute_layer.wafer.accelerator import (
    HOROWITZ_45NM,
    PALM_WAFER,
    PRESETS,
    Wafer,
    WaferEnergy,
    palm_wafer,
    wafer,
)
from stratasim.compute_layer.wafer.backend import WaferCompute
from stratasim.compute_layer.wafer.contention import EdgeLoad, edge_load
from stratasim.compute_layer.wafer.model import Plan, evaluate, plan
from stratasim.compute_layer.wafer.split import Conv, Elementwise, Gemm, Work, splits
from stratasim.compute_layer.wafer.sram import Allocation, Strategy, allocate

__all__ = [
    "Wafer",
    "WaferEnergy",
    "HOROWITZ_45NM",
    "PALM_WAFER",
    "PRESETS",
    "palm_wafer",
    "wafer",
    "Strategy",
    "Allocation",
    "allocate",
    "Work",
    "Gemm",
    "Conv",
    "Elementwise",
    "splits",
    "EdgeLoad",
    "edge_load",
    "Plan",
    "plan",
    "evaluate",
    "WaferCompute",
]
