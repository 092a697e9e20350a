"""The system layer: the event engine, collectives and ASTRA-sim's chunk scheduler.

It runs per-NPU execution graphs against a network federate and a compute service, and knows neither's
implementation: both come in through :mod:`stratasim.kernel.contracts`.
"""

from stratasim.system_layer.engine.contention import Contention
from stratasim.system_layer.engine.simulation import simulate, validate
from stratasim.system_layer.options import ALGORITHMS, Scheduling, SystemOptions
from stratasim.system_layer.result import CollectiveStats, LinkStats, NpuStats, SimulationResult, TraceSpan
from stratasim.system_layer.trace import TraceDetail, TraceSelection

__all__ = [
    "ALGORITHMS",
    "Contention",
    "Scheduling",
    "SystemOptions",
    "CollectiveStats",
    "LinkStats",
    "NpuStats",
    "SimulationResult",
    "TraceSpan",
    "TraceDetail",
    "TraceSelection",
    "simulate",
    "validate",
]
