"""A training study's goodput: the ``goodput:`` section and the simulated step time through the pure model
:mod:`stratasim.report.goodput`."""

from __future__ import annotations

import math
from typing import Any

from stratasim.config.goodput_section import GoodputSection
from stratasim.kernel.contracts import TrainingWorkload, WorkloadSource
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.report.goodput import goodput_figures
from stratasim.system_layer.result import SimulationResult

__all__ = ["CHECKPOINTED", "check_goodput", "checkpoint_bytes", "study_goodput"]


CHECKPOINTED = ("weights", "optimizer")
"""The kinds of memory a checkpoint writes (the engine's memory report names them)."""


def check_goodput(section: GoodputSection | None, source: WorkloadSource | RequestLevelWorkload) -> None:
    """Refuse a ``goodput`` section on a workload that is not a training one."""
    if section is not None and not isinstance(source, TrainingWorkload):
        raise WorkloadError(
            "goodput: the goodput model needs a training workload (a step time to checkpoint between); "
            f"this workload ({type(source).__name__}) is not one: remove the goodput section"
        )


def checkpoint_bytes(section: GoodputSection, result: SimulationResult) -> int:
    """The bytes each NPU writes per checkpoint: ``checkpoint.size``, or the most weights and optimizer state an
    NPU held (every NPU writes its own, data-parallel replicas too)."""
    if section.checkpoint.size is not None:
        return section.checkpoint.size
    held = max(
        (sum(size for kind, size in npu.memory_at_peak if kind in CHECKPOINTED) for npu in result.per_npu), default=0
    )
    if held <= 0:
        raise WorkloadError(
            "goodput.checkpoint.size: this workload reports no weights or optimizer state to checkpoint; give the "
            "bytes each NPU writes, e.g. size: 20GB"
        )
    return held


def study_goodput(section: GoodputSection, result: SimulationResult) -> dict[str, Any]:
    """The goodput figures (:class:`~stratasim.report.goodput.GoodputFigures`) of a run whose one iteration is
    ``result``; a checkpoint interval given as a duration shorter than a step is an error."""
    step_s = result.total_time_ps / 1e12
    interval = section.checkpoint.interval
    steps: int | None = None
    if isinstance(interval, float):
        if interval < step_s:
            raise WorkloadError(
                f"goodput.checkpoint.interval: {interval:g}s is shorter than one step ({step_s:.6g}s); "
                "checkpoint at most once a step"
            )
        steps = math.floor(interval / step_s)
    elif isinstance(interval, int):
        steps = interval
    counts = {"npu": result.npus, "node": math.ceil(result.npus / section.npus_per_node)}
    mtbf = {"npu": section.mtbf.npu, "node": section.mtbf.node}
    checkpoint_s = checkpoint_bytes(section, result) / section.checkpoint.bandwidth
    return goodput_figures(step_s, counts, mtbf, checkpoint_s, section.restart, steps).as_dict()
