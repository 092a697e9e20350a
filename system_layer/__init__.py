"""The system layer: the event engine, collectives and ASTRA-sim's chunk scheduler.

It runs per-NPU execution graphs against a network federate and a compute service, and knows neither's
implementation: both come in through :mod:`stratasim.kernel.contracts`.

The names are imported when first used: importing one module of the layer (the command line's
:mod:`~stratasim.system_layer.trace_detail`) does not import the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from stratasim.system_layer.engine.contention import Contention
    from stratasim.system_layer.engine.simulation import simulate, validate
    from stratasim.system_layer.options import ALGORITHMS, Scheduling, SystemOptions
    from stratasim.system_layer.result import CollectiveStats, LinkStats, NpuStats, SimulationResult, TraceSpan
    from stratasim.system_layer.trace import TraceSelection
    from stratasim.system_layer.trace_detail import TraceDetail

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

_HOMES = {
    "ALGORITHMS": "options",
    "Contention": "engine.contention",
    "Scheduling": "options",
    "SystemOptions": "options",
    "CollectiveStats": "result",
    "LinkStats": "result",
    "NpuStats": "result",
    "SimulationResult": "result",
    "TraceSpan": "result",
    "TraceDetail": "trace_detail",
    "TraceSelection": "trace",
    "simulate": "engine.simulation",
    "validate": "engine.simulation",
}


__getattr__ = lazy_exports(__name__, _HOMES)
