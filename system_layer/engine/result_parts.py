"""The parts of a simulation's result that come straight from what ran: each NPU's figures (from its executor and
scheduler), the milestones, the reductions run as priced operators, and each link's figures from the network's
counters.

:func:`stratasim.system_layer.engine.simulation.simulate` assembles the :class:`SimulationResult` from them; none
of them changes the engine's state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from stratasim.kernel.errors import BackendError
from stratasim.system_layer.engine.executor import NpuExecutor
from stratasim.system_layer.engine.node_times import node_times
from stratasim.system_layer.engine.plan_runs import PlanRun
from stratasim.system_layer.result import LinkBusy, LinkStats, NpuStats, PacketLatencyStats
from stratasim.system_layer.scheduler.chunk_scheduler import NpuScheduler, SchedulerContext
from stratasim.system_layer.scheduler.reduction import ReductionCost
from stratasim.system_layer.trace import TraceSelection
from stratasim.v1 import compute_pb2, network_pb2

__all__ = ["link_busy", "link_stats", "milestones", "packet_latency", "per_npu", "reductions_run"]


def per_npu(
    executors: dict[int, NpuExecutor],
    schedulers: dict[int, NpuScheduler],
    runs: dict[int, PlanRun],
    stand_in: tuple[int, ...] | None,
    npus: int,
) -> tuple[NpuStats, ...]:
    """Each of the ``npus`` NPUs' figures: its own, or (with stand-ins) its representative's timeline under its own
    id."""
    stats = {
        npu: _npu_stats(ex, schedulers[npu], runs[npu].energy_pj + _reduction_energy(schedulers[npu]))
        for npu, ex in executors.items()
    }
    if stand_in is None:
        return tuple(stats[npu] for npu in range(npus))
    return tuple(replace(stats[stand_in[npu]], npu=npu) for npu in range(npus))


def _npu_stats(executor: NpuExecutor, scheduler: NpuScheduler, energy_pj: float) -> NpuStats:
    resident = executor.plan.resident
    return NpuStats(
        executor.npu,
        executor.finish_ps,
        executor.compute_ps,
        scheduler.comm_ps,
        executor.finish_ps - executor.start_ps - executor.compute_ps - executor.waiting_ps,
        tuple(sorted(scheduler.bytes_sent.items())),
        exposed_comm_ps_by_kind=tuple(sorted(executor.exposed_ps.items())),
        peak_memory_bytes=sum(size for _, size in resident) + executor.peak_memory,
        peak_memory_ps=executor.peak_memory_ps,
        memory_at_peak=(*resident, ("working", executor.peak_memory)) if resident or executor.peak_memory else (),
        compute_energy_pj=energy_pj,
        p2p_bytes_per_dim=executor.p2p_bytes_per_dim(),
        waiting_ps=executor.waiting_ps,
        node_times=node_times(executor, scheduler) if scheduler.context.node_times else (),
    )


def _reduction_energy(scheduler: NpuScheduler) -> float:
    """Picojoules of the priced reductions one NPU's collectives ran (on its device), summed by size in a fixed
    order."""
    reduction = scheduler.reduction
    return sum(
        (count * reduction.operator(size)[1].energy_pj for size, count in sorted(scheduler.reductions.items())), 0.0
    )


def milestones(executors: dict[int, NpuExecutor]) -> dict[str, int]:
    """Each named milestone at the latest time an NPU reached it."""
    milestones: dict[str, int] = {}
    for executor in executors.values():
        for name, time_ps in executor.milestones.items():
            milestones[name] = max(time_ps, milestones.get(name, time_ps))
    return milestones


def reductions_run(
    context: SchedulerContext, stand_in: tuple[int, ...] | None
) -> list[tuple[compute_pb2.OperatorDesc, compute_pb2.OperatorCost, int, str]]:
    """Each priced reduction size (on each device) as an operator with its cost, how many times all NPUs ran it
    and the device it ran on."""
    stands_for = Counter(stand_in if stand_in is not None else list(context.schedulers))
    runs: dict[ReductionCost, Counter[int]] = {}
    for npu, scheduler in context.schedulers.items():
        counted = runs.setdefault(scheduler.reduction, Counter())
        for size, count in scheduler.reductions.items():
            counted[size] += count * stands_for[npu]
    return [
        (*cost.operator(size), count, cost.device)
        for cost, counted in runs.items()
        for size, count in sorted(counted.items())
    ]


def link_stats(counters: network_pb2.LinkCounters) -> tuple[LinkStats, ...]:
    """Each link's busy time, bytes, messages and queueing, as the network counted them, and its load by job when
    the network counted flows."""
    queue: Sequence[int | None] = counters.queue_ps or [None] * len(counters.link)
    by_job: list[tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]]]] = [
        ([], [], []) for _ in counters.link
    ]
    for index, job, size, messages, queue_ps in zip(
        counters.flow_link, counters.flow, counters.flow_bytes, counters.flow_messages, counters.flow_queue_ps
    ):
        if index >= len(by_job):
            raise BackendError(f"the network's load by flow names link {index} of {len(by_job)}")
        sizes, counts, waits = by_job[index]
        sizes.append((job, size))
        counts.append((job, messages))
        waits.append((job, queue_ps))
    return tuple(
        LinkStats(name, busy, size, messages, waited, tuple(sizes), tuple(counts), tuple(waits))
        for name, busy, size, messages, waited, (sizes, counts, waits) in zip(
            counters.link, counters.busy_ps, counters.bytes, counters.messages, queue, by_job
        )
    )


def packet_latency(counters: network_pb2.LinkCounters) -> PacketLatencyStats:
    latency = counters.packet_latency
    return PacketLatencyStats(
        latency.packets, latency.total_ps, latency.min_ps, latency.p50_ps, latency.p99_ps, latency.max_ps
    )


def link_busy(counters: network_pb2.LinkCounters, selection: TraceSelection) -> tuple[LinkBusy, ...]:
    """When each link was transmitting, within the selection's window (links idle throughout left out)."""
    busy = (
        (link.link, [s for s in zip(link.start_ps, link.end_ps) if selection.overlaps(*s)]) for link in counters.busy
    )
    return tuple(LinkBusy(link, tuple(stretches)) for link, stretches in busy if stretches)
