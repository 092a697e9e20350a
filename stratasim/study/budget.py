"""The run's budget: what a study would build and simulate, estimated from the study before anything is built,
and refused with a message naming what to reduce when it exceeds the memory or the events allowed.

The estimate is a cheap cost model, conservative (above what runs take: the examples' real peaks are a half to
a third of it) but not so far above that it refuses the studies people run — GPT-3 175B on 1024 GPUs, Megatron's
1T-parameter plan. Each workload says what it would build (:class:`~stratasim.kernel.work.WorkEstimate`); this
module prices that against the topology and the system options. The budget comes from the caller — ``--max-memory``
and ``--max-events`` on the command line, ``max_memory=`` and ``max_events=`` in Python — never from the study, so a
study file cannot raise its own limit.

A trace replayed is priced by its nodes at :data:`NODE_BYTES` each: a Chakra trace's nodes are counted from its
records' length prefixes (``workload_layer.traces.rank_files.COUNTED_RECORDS`` of them at most, the rest bounded by the
files' sizes, so a trace of millions of tiny nodes is still refused before it is read). Measured on the transformer
example's own export (32 ranks of 2,539 nodes, 67 bytes each), replayed: estimated 169 MB, peak resident memory
143 MB of which some 60 MB is the interpreter and its imports (``resource.getrusage``'s ``ru_maxrss``); the size
bound alone said 2.7 GiB and refused it.
A serving job replayed on the shared fabric (:mod:`stratasim.study.serving_replay`) is priced once its loop has run,
from what ``replay_size`` counts: its graphs' nodes at :data:`NODE_BYTES` and the nodes the engine runs (blocks
unrolled, every rank) at :data:`RUN_NODE_BYTES`, on top of the rest of the study's estimate
(:func:`replay_memory`). Fitted to the peak resident memory of ``benchmarks/jobs/train_and_serve_replay.yaml`` at
25, 50 and 100 requests (1.26, 2.59 and 4.70 million nodes run; 612, 1,186 and 2,106 MiB): some 68 MiB of
interpreter, imports and training job, then 454 bytes per node run (the graphs' nodes are a ninth of those run).
The estimate, 493 bytes per node run, is 3 % under at 25 requests (where the interpreter weighs most) and over
from 50 on; held out, at 200 requests (10.3 million nodes run) it says 4.74 GiB against 4.43 GiB used (+7 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from stratasim.config.study_file import Study
from stratasim.kernel import registry
from stratasim.kernel.contracts import SymmetricWorkload, WorkloadSource
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import format_bytes
from stratasim.kernel.work import EstimableWorkload, WorkEstimate
from stratasim.network_layer import topologies
from stratasim.study.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_MEMORY
from stratasim.system_layer.collectives.algorithms import FLATTENED, split_name
from stratasim.system_layer.symmetry.stand_ins import constant_on_classes, may_aggregate, slowdowns_agree

__all__ = [
    "Budget",
    "DEFAULT_BUDGET",
    "BudgetError",
    "Estimate",
    "check_budget",
    "check_conversion",
    "estimate_study",
    "long_run_note",
    "NODE_BYTES",
    "refuse_over",
    "refuse_npus",
    "replay_memory",
    "stateless",
]

_NPU_BYTES = 4096  # per NPU of the topology: its stats, report row, stand-in entry (measured: about 1.6 KiB)
NODE_BYTES = 2048
"""Memory per graph node built and simulated (measured: about 1.5 KiB, its message and the engine's plan)."""
RUN_NODE_BYTES = 256
"""Memory per node a serving job's replay runs in the engine, on each rank, its blocks unrolled
(:func:`replay_memory`): the plan each distinct graph unrolls to, each rank's executor state and, for a collective,
its chunk runs while it runs and its statistics after."""
_PACKET_BYTES = 256  # per flit-level packet of a message in flight
_LINK_BYTES = 256  # per link or switch a link-level network builds (measured: about 120 bytes)


class BudgetError(StrataSimError):
    """A study (or a command's request) would need more memory or events than the run's budget allows."""


@dataclass(frozen=True)
class Budget:
    """What a run may use: ``max_memory`` bytes and ``max_events`` engine events, both estimated beforehand."""

    max_memory: int = DEFAULT_MAX_MEMORY
    max_events: int = DEFAULT_MAX_EVENTS

    @staticmethod
    def of(max_memory: int | None = None, max_events: int | None = None) -> Budget:
        """The default budget with whichever of ``max_memory`` and ``max_events`` is given; each must be positive."""
        for name, value in (("max_memory", max_memory), ("max_events", max_events)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise StrataSimError(f"{name} must be a positive whole number, got {value!r}")
        return Budget(max_memory or DEFAULT_MAX_MEMORY, max_events or DEFAULT_MAX_EVENTS)


DEFAULT_BUDGET = Budget()
"""The budget of a run that names none (frozen: shared safely)."""


@dataclass(frozen=True)
class Estimate:
    """What a study would take: ``npus`` NPUs of which ``simulated`` are simulated, ``nodes`` graph nodes in all,
    ``events`` engine events, and memory in three parts — per NPU, for the graphs (``graph_memory``) and for
    flit-level packets in flight (``packet_memory``); ``work`` is the workload's own estimate; ``representatives``
    the NPUs a symmetric workload named when the estimate asked it (so the run need not ask again), else None."""

    npus: int
    simulated: int
    nodes: int
    events: int
    npu_memory: int
    graph_memory: int
    packet_memory: int
    work: WorkEstimate
    representatives: tuple[int, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def memory(self) -> int:
        """Bytes the run would use in all."""
        return self.npu_memory + self.graph_memory + self.packet_memory


def _steps(sizes: tuple[int, ...], flattened: bool) -> int:
    """Messages one chunk of a collective over every dimension sends per NPU at most (a ring all-reduce's 2(n-1)
    per dimension; 2(N-1) over all N NPUs when an algorithm runs on them flattened into one line)."""
    if flattened:
        return 2 * (math.prod(sizes) - 1) or 1
    return sum(2 * (size - 1) for size in sizes) or 1


def _flits(study: Study, message: int) -> tuple[int, int]:
    """Packets a message of ``message`` bytes is cut into on a flit-level network and flits per packet; (0, 0)
    on any other network."""
    if not message or "flit_level" not in study.network.backends().values():
        return 0, 0
    from stratasim.network_layer.flit_level.parameters import FlitParameters  # the flit level: for its studies only

    flit, defaults = study.network.flit, FlitParameters()  # the backend's defaults, for the keys flit leaves out
    flit_bytes = (flit.flit_bytes if flit is not None else None) or defaults.flit_bytes
    packet_flits = (flit.packet_flits if flit is not None else None) or defaults.packet_flits
    return -(-message // (flit_bytes * packet_flits)), packet_flits


def _ns3_packets(study: Study, message: int) -> int:
    """Packets of ``adapters.ns3``'s MTU (4096 bytes, RoCE's largest) a message of ``message`` bytes is on ns-3,
    each an event of its simulation per link; 0 on any other network (its packets live in ns-3's process, so only
    the time they take is counted here)."""
    if "ns3" not in study.network.backends().values():
        return 0
    from stratasim.adapters.ns3.network import MTU  # the adapter's module: for its studies only

    return -(-message // MTU)


def _stateless(study: Study) -> bool:
    """Whether the study's network backend declares that its delays never depend on traffic (:func:`stateless`)."""
    return stateless(study.network.backend_name)


def stateless(backend: str) -> bool:
    """Whether network ``backend`` declares that its delays never depend on traffic (its class's ``stateless``): it
    holds no state per link, and NPUs equivalent by symmetry may be simulated once. A backend not installed here
    (served elsewhere) declares nothing."""
    if backend not in registry.available("network"):
        return False
    return getattr(registry.load("network", backend), "stateless", False) is True


def _aggregated(study: Study) -> bool:
    """Whether the engine may simulate NPUs equivalent by symmetry once (see ``system_layer.symmetry``): not when
    ``system.variability`` makes them differ (fixed slow-downs may agree with the stand-ins: :func:`_classes_agree`),
    nor when ``system.failures`` stops some."""
    system = study.system
    return may_aggregate(system, _stateless(study)) and system.variability is None and not system.failures


def _classes_agree(study: Study, representatives: tuple[int, ...]) -> bool:
    """Whether NPU groups on other devices (``compute.groups``) and ``system.slowdown`` leave the representatives
    standing in: every NPU runs its representative's device and is slowed alike (the engine simulates every NPU
    otherwise)."""
    devices = study.compute is None or constant_on_classes(representatives, study.compute.device_of())
    return devices and slowdowns_agree(representatives, study.system)


def estimate_study(study: Study, source: WorkloadSource, npus: int, simulated: int | None = None) -> Estimate:
    """The :class:`Estimate` of running ``source`` (``study``'s workload) on ``npus`` NPUs, without building it.

    NPUs are simulated one by one unless the engine may aggregate them (analytical network, symmetric
    algorithms), and then one per representative a symmetric workload names — asked of the workload unless
    ``simulated`` says how many (asking costs time in the NPUs and micro-batches); a workload that gives no
    estimate counts as one node per NPU."""
    grid = study.grid
    work = (
        source.estimate(npus) if isinstance(source, EstimableWorkload) else WorkEstimate(npus, 1, 1, 0, "the workload")
    )
    aggregated = _aggregated(study)
    named: tuple[int, ...] | None = None
    if simulated is None:
        simulated = npus
        if aggregated and isinstance(source, SymmetricWorkload):
            representatives = source.representatives(grid)
            named = None if representatives is None else tuple(representatives)
            simulated = npus if named is None or not _classes_agree(study, named) else len(set(named))
    if study.system.slowdown and simulated == npus:
        aggregated = False  # slowed NPUs simulated one by one run no line of NPUs at once
    flattened = any(split_name(name)[0] in FLATTENED for names in study.system.algorithm.values() for name in names)
    per_chunk = len(grid.sizes) if aggregated else _steps(grid.sizes, flattened)  # aggregated: a line at a time
    splits = study.system.splits
    packets, flits = _flits(study, work.largest_message // splits)
    per_message = max(packets * flits * 2, _ns3_packets(study, work.largest_message // splits), 1)
    events = simulated * (work.nodes + work.communications * splits * per_chunk * per_message)
    in_flight = study.system.active_chunks * len(grid.sizes) * simulated
    built = max(min(work.graphs, simulated), simulated) if work.graphs > 1 else simulated  # lazy: simulated only
    return Estimate(
        npus,
        simulated,
        simulated * work.nodes,
        events,
        npus * _NPU_BYTES,
        built * work.nodes * NODE_BYTES,
        in_flight * packets * _PACKET_BYTES,
        work,
        named,
    )


PACKET_EVENTS_PER_SECOND = 1_500_000
"""Estimated events (:attr:`Estimate.events`) a packet-level network gets through per second of wall time: the
flit level ran quickstart's all-reduce at 1 and 4 MiB, 21 and 84 million estimated events, in 11 and 50 s on the
project machine (shared, 2 cores), some 60 times analytical's 0.01 s; ns-3 is priced at the same pace."""
LONG_RUN_SECONDS = 10
"""A run predicted longer than this is announced before it starts."""


def long_run_note(study: Study, estimate: Estimate) -> str | None:
    """One line announcing a long run before it starts, when the study's network simulates packets (flit level,
    ns-3) and ``estimate`` predicts more than :data:`LONG_RUN_SECONDS` of it; None otherwise."""
    packet_level = sorted({"flit_level", "ns3"} & set(study.network.backends().values()))
    seconds = estimate.events / PACKET_EVENTS_PER_SECOND
    if not packet_level or seconds < LONG_RUN_SECONDS:
        return None
    said = f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
    return (
        f"the {' and '.join(packet_level)} network simulates every packet: about {estimate.events:.2g} events, some "
        f"{said} at {PACKET_EVENTS_PER_SECOND / 1e6:.1f} million a second (the analytical network takes a fraction "
        "of it: --set network.backend=analytical for a first look)"
    )


def refuse_over(what: str, memory: int, events: int, budget: Budget, reduce: str) -> None:
    """Raise :class:`BudgetError` when ``what`` needs more ``memory`` or ``events`` than ``budget``; the message
    says to reduce ``reduce`` or how to raise the budget."""
    if memory > budget.max_memory:
        raise BudgetError(
            f"{what} would need about {format_bytes(memory)} of memory, over the budget of "
            f"{format_bytes(budget.max_memory)}: reduce {reduce}, or raise the budget with --max-memory (e.g. "
            f"--max-memory {format_bytes(_round_up(memory)).replace(' ', '')}; in Python, max_memory=)"
        )
    if events > budget.max_events:
        raise BudgetError(
            f"{what} would process about {events:.2g} events, over the budget of {budget.max_events:.2g}: reduce "
            f"{reduce}, or raise the budget with --max-events (in Python, max_events=)"
        )


def refuse_npus(what: str, npus: int, budget: Budget, reduce: str) -> None:
    """Raise :class:`BudgetError` when ``what``'s ``npus`` NPUs alone (each its statistics, report row, stand-in
    entry) would need more memory than ``budget``; the message says to reduce ``reduce``."""
    refuse_over(f"{what}: {npus:,} NPUs", npus * _NPU_BYTES, 0, budget, reduce)


def _round_up(size: int) -> int:
    """``size`` rounded up to a power of two, a budget to suggest."""
    return 1 << max(size - 1, 1).bit_length()


def check_budget(study: Study, source: WorkloadSource, npus: int, budget: Budget) -> Estimate:
    """The study's :class:`Estimate`, or :class:`BudgetError` naming what to reduce when it exceeds ``budget``.

    Checked in order of cost, so that each check runs only once the previous ones bound what it walks: the NPUs,
    the links and switches a link-level network would build (counted from the topology's fields),
    the graphs of one simulated NPU, then the NPUs the engine would simulate (asking a symmetric workload for its
    representatives walks every NPU), the packets in flight and the events."""
    refuse_npus(study.source, npus, budget, "network.topology's sizes")
    if not _stateless(study):  # a network holding state per link builds every link and switch of a fabric
        links = topologies.size(study.topology_proto())[1]
        refuse_over(
            f"{study.source}: {links:,} links and switches of the {study.network.backend_name} network",
            links * _LINK_BYTES,
            0,
            budget,
            "network.topology's sizes (planes, k, groups, routers, shape)",
        )
    one = estimate_study(study, source, npus, simulated=1)
    what = f"{study.source}: {one.work.nodes:.3g} graph nodes per simulated NPU"
    refuse_over(what, one.npu_memory + one.graph_memory, 0, budget, one.work.drivers)
    estimate = estimate_study(study, source, npus)
    what = f"{study.source}: {estimate.nodes:.3g} graph nodes on {estimate.simulated:,} simulated NPUs (of {npus:,})"
    refuse_over(what, estimate.npu_memory + estimate.graph_memory, 0, budget, one.work.drivers)
    refuse_over(
        f"{study.source}: the flit-level packets in flight",
        estimate.memory,
        0,
        budget,
        "the collectives' sizes, or raise system.splits or network.flit's packet_flits",
    )
    refuse_over(
        f"{study.source}: the simulation",
        0,
        estimate.events,
        budget,
        f"system.splits, the topology's sizes or {one.work.drivers}",
    )
    return estimate


def replay_memory(nodes: int, run: int) -> int:
    """Bytes a serving job's replay on the shared fabric takes: its graphs' ``nodes`` at :data:`NODE_BYTES` and the
    ``run`` nodes the engine runs, its blocks unrolled over every rank, at :data:`RUN_NODE_BYTES` (what
    ``replay_size`` counts; module docstring)."""
    return nodes * NODE_BYTES + run * RUN_NODE_BYTES


def check_conversion(path: str, npus: int, passes: int, budget: Budget) -> None:
    """Refuse converting the ASTRA-sim text workload ``path`` for ``npus`` NPUs and ``passes`` iterations when
    its graphs, all held at once, would exceed ``budget`` (memory; each node written counts as an event)."""
    if npus < 1 or passes < 1:
        return  # the conversion says what is wrong
    from stratasim.workload_layer.traces.astra_text import AstraTextConfig, AstraTextWorkload

    work = AstraTextWorkload(AstraTextConfig(path=path, npus=npus, passes=passes)).estimate(npus)
    nodes = npus * work.nodes
    refuse_over(
        f"{path}: converting for {npus:,} NPUs ({nodes:.3g} nodes)",
        nodes * NODE_BYTES,
        nodes,
        budget,
        "--npus or --passes",
    )
