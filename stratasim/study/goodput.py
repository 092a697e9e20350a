"""A training study's goodput: the ``goodput:`` section and the simulated step time through the pure model
:mod:`stratasim.report.goodput`."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from stratasim.config.goodput_section import GoodputSection
from stratasim.kernel.contracts import CheckpointModel, TrainingWorkload, WorkloadSource
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.network_layer.topologies import components
from stratasim.report.goodput import goodput_figures
from stratasim.system_layer.result import SimulationResult
from stratasim.v1 import network_pb2

__all__ = ["CHECKPOINTED", "check_goodput", "checkpoint_bytes", "checkpoint_seconds", "study_goodput"]


CHECKPOINTED = ("weights", "optimizer")
"""The kinds of memory a checkpoint writes (the engine's memory report names them)."""


def check_goodput(section: GoodputSection | None, source: WorkloadSource | RequestLevelWorkload) -> None:
    """Refuse a ``goodput`` section on a workload that is not a training one."""
    if section is not None and not isinstance(source, TrainingWorkload):
        raise WorkloadError(
            "goodput: the goodput model needs a training workload (a step time to checkpoint between); "
            f"this workload ({type(source).__name__}) is not one: remove the goodput section"
        )


def checkpoint_bytes(
    section: GoodputSection, result: SimulationResult, source: WorkloadSource | None = None
) -> list[int]:
    """The bytes each NPU writes per checkpoint (index = NPU id): ``checkpoint.size`` each; else, with
    ``checkpoint.writers: every_rank``, the weights and optimizer state each NPU held (the engine's memory report;
    data-parallel replicas write theirs too); else what the workload says its NPUs write, each model shard once
    (:class:`~stratasim.kernel.contracts.CheckpointModel`)."""
    options = section.checkpoint
    if options.size is not None:
        return [options.size] * result.npus
    if options.writers != "every_rank":
        if not isinstance(source, CheckpointModel):
            raise WorkloadError(
                f"goodput.checkpoint.writers: {options.writers} needs a workload that knows its model shards "
                "(kind: transformer); give checkpoint.size, or writers: every_rank"
            )
        return source.checkpoint_bytes_per_npu(options.writers)
    held = [sum(size for kind, size in npu.memory_at_peak if kind in CHECKPOINTED) for npu in result.per_npu]
    if max(held, default=0) <= 0:
        raise WorkloadError(
            "goodput.checkpoint.size: this workload reports no weights or optimizer state to checkpoint; give the "
            "bytes each NPU writes, e.g. size: 20GB"
        )
    return held


def checkpoint_seconds(section: GoodputSection, written: list[int]) -> float:
    """The time to write a checkpoint of ``written`` bytes per NPU, every NPU at once: the slowest NPU's bytes over
    ``checkpoint.bandwidth``, or with ``checkpoint.node_bandwidth`` the busiest node's (its NPUs' bytes together)
    over it."""
    options = section.checkpoint
    if options.node_bandwidth is None:
        return max(written) / options.bandwidth
    per_node: Counter[int] = Counter()
    for npu, size in enumerate(written):
        per_node[npu // section.npus_per_node] += size
    return max(per_node.values()) / options.node_bandwidth


def study_goodput(
    section: GoodputSection,
    result: SimulationResult,
    topology: network_pb2.Topology | None = None,
    source: WorkloadSource | None = None,
) -> dict[str, Any]:
    """The goodput figures (:class:`~stratasim.report.goodput.GoodputFigures`) of a run whose one iteration is
    ``result``, on ``topology`` (whose links and switches fail too when ``mtbf`` gives their rates), of the
    workload ``source``; a checkpoint interval given as a duration shorter than a step is an error."""
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
    counts, mtbf = _components(section, result.npus, topology)
    checkpoint_s = checkpoint_seconds(section, checkpoint_bytes(section, result, source))
    return goodput_figures(step_s, counts, mtbf, checkpoint_s, section.restart, steps).as_dict()


def _components(
    section: GoodputSection, npus: int, topology: network_pb2.Topology | None
) -> tuple[dict[str, int], dict[str, float]]:
    """How many components of each kind can fail, and each one's MTBF: the NPUs and nodes, and the topology's
    links and switches when ``mtbf`` gives their rates (otherwise their failures are in the nodes' share)."""
    rates = section.mtbf
    counts = {"npu": npus, "node": math.ceil(npus / section.npus_per_node)}
    mtbf = {"npu": rates.npu, "node": rates.node}
    if (rates.link is not None or rates.switch is not None) and topology is not None:
        links, switches = components(topology)
        for kind, count, rate in (("link", links, rates.link), ("switch", switches, rates.switch)):
            if rate is not None and count:
                counts[kind], mtbf[kind] = count, rate
    return counts, mtbf
