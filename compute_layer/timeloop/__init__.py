"""A Timeloop-style compute model: accelerators, mappings, their analysis, a mapper and the ``timeloop`` backend.

An accelerator (:mod:`.accelerator`) is a PE array under a hierarchy of storage levels; a problem
(:mod:`.problem`) is an operator as a loop nest; a mapping (:mod:`.mapping`) tiles, orders and unrolls that
nest; :mod:`.analysis` turns a mapping into access counts, cycles and energy; :mod:`.mapper` searches mappings;
:mod:`.scalesim` holds SCALE-Sim's compute-cycle formula; :mod:`.backend` is the ComputeBackend.
"""

from stratasim.compute_layer.timeloop.accelerator import Accelerator, StorageLevel
from stratasim.compute_layer.timeloop.accelerator_presets import PRESETS, accelerator, systolic
from stratasim.compute_layer.timeloop.analysis import Evaluation, evaluate
from stratasim.compute_layer.timeloop.backend import TimeloopCompute
from stratasim.compute_layer.timeloop.mapper import search
from stratasim.compute_layer.timeloop.mapping import Mapping, MappingError
from stratasim.compute_layer.timeloop.problem import Problem, conv2d, elementwise, gemm
from stratasim.compute_layer.timeloop.scalesim import scalesim_cycles

__all__ = [
    "Accelerator",
    "StorageLevel",
    "PRESETS",
    "accelerator",
    "systolic",
    "Problem",
    "gemm",
    "conv2d",
    "elementwise",
    "Mapping",
    "MappingError",
    "Evaluation",
    "evaluate",
    "search",
    "scalesim_cycles",
    "TimeloopCompute",
]
