"""What one simulation produced, in integer picoseconds; the composition root turns it into a report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from stratasim.system_layer.spans import CounterSample, TraceSpan

if TYPE_CHECKING:
    from stratasim.system_layer.trace import SpanLog

__all__ = [
    "CollectiveStats",
    "FailureStats",
    "NpuStats",
    "NodeTime",
    "TraceSpan",
    "CounterSample",
    "LinkStats",
    "LinkBusy",
    "PacketLatencyStats",
    "OperatorStats",
    "SimulationResult",
]


class CollectiveStats(NamedTuple):
    """One collective across its group: when it started and ended, and where its chunks spent time per phase.

    Phase p ran ``phase_collectives[p]`` along dimension ``phase_dims[p]`` (-1: a flat phase over a group that
    is not a product of dimensions). ``queue_delay_ps_per_phase[p]`` is the mean time a chunk waited in phase
    p's queue before running; ``network_delay_ps_per_phase[p]`` the mean time a chunk took to run phase p
    (means over NPUs and chunks); the ``_per_chunk`` tables give the same per chunk (means over NPUs).
    ``communicator`` names the communicator its nodes issued it on (``tp``, ``dp``...; "" for none).
    A named tuple: a whole model's iteration reports hundreds of thousands.
    """

    collective_id: int
    type: str
    bytes: int
    group_size: int
    start_ps: int
    end_ps: int
    queue_delay_ps_per_phase: tuple[int, ...]
    network_delay_ps_per_phase: tuple[int, ...]
    phase_dims: tuple[int, ...] = ()
    phase_collectives: tuple[str, ...] = ()
    queue_delay_ps_per_chunk: tuple[tuple[int, ...], ...] = ()
    network_delay_ps_per_chunk: tuple[tuple[int, ...], ...] = ()
    communicator: str = ""


@dataclass(frozen=True)
class NodeTime:
    """Where one NPU's time went, by the name of the node it fell to (a node of a block under the block node's name
    followed by its own, as traces name it; nodes of one name summed).

    ``compute_ps`` is the node's compute time; ``comm_ps_by_kind`` the time with collectives in flight charged to it
    (each stretch to the node that issued the oldest collective then in flight), by its communicator name (as
    ``exposed_comm_ps_by_kind`` labels them); ``exposed_ps_by_kind`` the idle compute time charged to it, by label.
    Over an NPU's nodes they sum to its ``compute_ps``, ``comm_ps`` and ``exposed_comm_ps_by_kind``, to the
    picosecond; a fused run of compute nodes splits its time over its members by their durations.
    """

    name: str
    compute_ps: int = 0
    comm_ps_by_kind: tuple[tuple[str, int], ...] = ()
    exposed_ps_by_kind: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class NpuStats:
    """One NPU's timeline: ``exposed_comm_ps`` is its time neither computing nor waiting before it finished;
    ``bytes_sent_per_dim`` maps a dimension (-1: flat phases) to the collective bytes it sent along it, and
    ``p2p_bytes_per_dim`` to the point-to-point bytes it sent across it (a message counts on each dimension
    its two ends differ in).

    ``exposed_comm_ps_by_kind`` splits the exposed time by what ended each wait: the communicator name
    (``pg_name``) of the node the compute stream waited on, else ``p2p``, ``collective`` or ``other``; the parts
    sum to ``exposed_comm_ps``. ``peak_memory_bytes`` is the most the NPU held (resident plus what its nodes had
    allocated), first reached at ``peak_memory_ps``; ``memory_at_peak`` breaks it down by resident kind plus
    ``working`` (the nodes' allocations: activations, KV cache). ``compute_energy_pj`` is the energy, in
    picojoules, the compute backend gave the NPU's priced operators, summed over every node that ran one.
    ``waiting_ps`` is the time it was idle because of its wait nodes (``WAIT_NODE``: waiting on purpose, a serving
    replica waiting for requests), counted neither as compute nor as exposed communication. ``node_times`` splits
    its compute, communication and exposed time by node name (:class:`NodeTime`; sorted by name), when the run
    asked for node times (``simulate(..., node_times=True)``; empty otherwise).
    """

    npu: int
    finish_ps: int
    compute_ps: int
    comm_ps: int
    exposed_comm_ps: int
    bytes_sent_per_dim: tuple[tuple[int, int], ...] = ()
    exposed_comm_ps_by_kind: tuple[tuple[str, int], ...] = ()
    peak_memory_bytes: int = 0
    peak_memory_ps: int = 0
    memory_at_peak: tuple[tuple[str, int], ...] = ()
    compute_energy_pj: float = 0.0
    p2p_bytes_per_dim: tuple[tuple[int, int], ...] = ()
    waiting_ps: int = 0
    node_times: tuple[NodeTime, ...] = field(default=(), compare=False)  # by name: graphs named apart still agree


@dataclass(frozen=True)
class LinkStats:
    """What one link carried over the run (networks that model links only).

    ``queue_ps`` is the time its messages waited for it to be free, summed (from networks that queue messages for
    links, the congestion-aware network; None from the others, which do not measure it). In a study of several jobs, ``bytes_by_job``,
    ``messages_by_job`` and ``queue_ps_by_job`` split the link's bytes, messages and queueing by the job of the
    sending NPU, as (job, value) in job order, jobs that did not use the link left out (empty in a single-job study,
    or from a network that does not count by job).
    """

    link: str
    busy_ps: int
    bytes: int
    messages: int
    queue_ps: int | None = None
    bytes_by_job: tuple[tuple[int, int], ...] = ()
    messages_by_job: tuple[tuple[int, int], ...] = ()
    queue_ps_by_job: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class LinkBusy:
    """When one link was transmitting: ``spans`` are its ``(start_ps, end_ps)`` stretches, disjoint and in time
    order, summing to its ``LinkStats.busy_ps`` (recorded with the trace only)."""

    link: str
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class PacketLatencyStats:
    """How long packets took, from their message being sent to their last flit arriving, in ps (networks that
    cut messages into packets only; ``packets`` is 0 from the others). ``p50_ps`` and ``p99_ps`` come from a
    log-linear histogram: at most 1/32 above the exact percentile, and exact when every packet took the same."""

    packets: int = 0
    total_ps: int = 0
    min_ps: int = 0
    p50_ps: int = 0
    p99_ps: int = 0
    max_ps: int = 0

    @property
    def mean_ps(self) -> float:
        """Mean latency (0 without packets)."""
        return self.total_ps / self.packets if self.packets else 0.0


@dataclass(frozen=True)
class OperatorStats:
    """One distinct operator the compute backend priced: what it is (``names``: the first few distinct names the
    workload gave it), how many times the study ran it (over all NPUs), and the cost of one run — picoseconds,
    picojoules, what bound it, the bytes per memory level and where its time comes from (``basis``: ``measured``,
    ``fitted_to_operators``, ``fitted_to_runs``, ``datasheet``, or ``unknown`` when the backend does not say);
    ``device``: the device it was priced on when NPU groups run different devices (empty otherwise)."""

    names: tuple[str, ...]
    kind: str
    shape: tuple[int, ...]
    dtype: str
    flops: int
    bytes: int
    count: int
    duration_ps: int
    energy_pj: float
    bound: str
    traffic: tuple[tuple[str, int], ...] = ()
    basis: str = "unknown"
    device: str = ""


@dataclass(frozen=True)
class FailureStats:
    """One NPU that failed (``system.failures``): at ``at_ps``, holding job ``job`` (-1: it held no work then), whose
    ``stopped`` NPUs stopped there (0: the job had already finished, or the NPU held none); ``unfinished`` names what
    the job had in flight that could not complete (``all_reduce on communicator dp``; "" when nothing was)."""

    npu: int
    at_ps: int
    job: int
    stopped: int
    unfinished: str = ""


@dataclass(frozen=True)
class SimulationResult:
    """``events_processed`` counts engine events plus delivered messages; ``simulated_npus`` is how many NPUs
    were simulated one by one (the representatives when symmetric NPUs were aggregated, else ``npus``);
    ``milestones`` maps the name of each milestone node to the latest time any NPU finished it; ``counters``
    (recorded with the trace only) sample each NPU's memory whenever it changes; ``link_busy`` (likewise, from
    networks that model links) says when each link was transmitting; ``packet_latency`` how long packets took
    (from networks that packetise); ``operators`` lists every distinct priced operator (see
    :class:`OperatorStats`).

    ``spans`` and ``counters`` (recorded with the trace only, see :mod:`stratasim.system_layer.trace`) are of the
    simulated NPUs alone: ``stand_ins[npu]`` is the NPU whose timeline ``npu`` lived when NPUs equivalent by
    symmetry were simulated once (empty when every NPU was simulated); :meth:`stands_for` inverts it.
    ``trace_detail`` is the detail they were recorded at (``auto`` resolved; "" without a trace) and
    ``traced_nodes`` how many nodes the traced NPUs ran, blocks unrolled. ``stopped_at_ps`` is the simulated time
    a run was stopped at before it finished (``None``: it ran to the end), ``stopped_because`` why; every figure
    then covers the run up to that time, and the ``unfinished_collectives`` in flight end at it. ``notes`` are what
    the engine tells the report (a fast path it turned off, and why); ``failures`` the NPUs that failed, in time
    order (see :class:`FailureStats`)."""

    total_time_ps: int
    npus: int
    collectives: Sequence[CollectiveStats]
    per_npu: tuple[NpuStats, ...]
    spans: tuple[TraceSpan, ...] | SpanLog
    events_processed: int
    simulated_npus: int = 0
    links: tuple[LinkStats, ...] = ()
    milestones: dict[str, int] = field(default_factory=dict)
    counters: tuple[CounterSample, ...] = ()
    link_busy: tuple[LinkBusy, ...] = ()
    operators: tuple[OperatorStats, ...] = ()
    packet_latency: PacketLatencyStats = PacketLatencyStats()
    stand_ins: tuple[int, ...] = ()
    trace_detail: str = ""
    traced_nodes: int = field(default=0, compare=False)  # how much the run did, like the wall time
    stopped_at_ps: int | None = None
    stopped_because: str = ""
    unfinished_collectives: int = 0
    notes: tuple[str, ...] = ()
    failures: tuple[FailureStats, ...] = ()

    @property
    def stopped_by_failure(self) -> bool:
        """Whether an NPU failure stopped the run (its only job), rather than Ctrl-C or a signal."""
        stopped = self.stopped_at_ps
        return stopped is not None and any(f.stopped and f.at_ps == stopped for f in self.failures)

    def stands_for(self) -> dict[int, tuple[int, ...]]:
        """Each simulated NPU and the NPUs (itself included, in order) whose timeline it is."""
        if not self.stand_ins:
            return {npu: (npu,) for npu in range(self.npus)}
        lived: dict[int, list[int]] = {}
        for npu, representative in enumerate(self.stand_ins):
            lived.setdefault(representative, []).append(npu)
        return {npu: tuple(npus) for npu, npus in lived.items()}
