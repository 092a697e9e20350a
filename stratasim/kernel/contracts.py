"""The seams between layers: each a few typed, batched methods whose arguments are ``proto/`` messages.

The engine calls these Protocols and cannot tell an in-process backend from a gRPC client forwarding to
``stratasim serve``. A backend customises a layer by implementing one of them and registering its factory
under the layer's entry-point group (see :mod:`stratasim.kernel.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from stratasim.kernel.grid import Grid
from stratasim.v1 import compute_pb2, network_pb2, workload_pb2

if TYPE_CHECKING:
    import numpy as np

    from stratasim.kernel.serving import RequestLevelWorkload

__all__ = [
    "PROTOCOL_VERSION",
    "NEXT_WINDOW",
    "NetworkBackend",
    "DirectNetwork",
    "ColumnarNetwork",
    "LineNetwork",
    "LineLinks",
    "LineConflict",
    "ComputeBackend",
    "SizedWork",
    "WorkloadSource",
    "SymmetricWorkload",
    "TrainingWorkload",
    "MemoryModel",
    "RoutedWorkload",
    "CheckpointModel",
    "CheckpointWriters",
    "DeviceBalancedWorkload",
    "ServingWorkload",
    "PlacedJob",
    "MultiJobWorkload",
]

# Bumped on any incompatible change of the protos or of these contracts; remote peers must agree exactly.
# 4: SendBatch.flow, Topology.link_changes and NetworkBackend.cancel (an older server would ignore them silently).
# 5: SendBatch.reductions, a switch that reduces (an older server would take each contribution for an ordinary message).
PROTOCOL_VERSION = 5

# ``NetworkBackend.advance(NEXT_WINDOW)``: the engine has nothing scheduled, so the network runs its own next window.
NEXT_WINDOW = -1


@runtime_checkable
class NetworkBackend(Protocol):
    """An event-driven network federate under conservative time windows.

    The engine calls ``configure`` once, then alternates ``inject`` (the messages sent in the window just
    processed) and ``advance``. A backend delivers no message earlier than ``send_time_ps + lookahead_ps``;
    in return the engine never injects a message that could arrive at or before the last ``advance`` end.
    """

    name: str

    def configure(self, topology: network_pb2.Topology) -> network_pb2.NetworkInfo:
        """Build the network; raise :class:`~stratasim.kernel.errors.TopologyError` if the topology is invalid."""
        ...

    def inject(self, sends: network_pb2.SendBatch) -> None:
        """Accept messages for delivery; ids are unique within a session."""
        ...

    def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
        """Run up to and including ``until_ps``; return deliveries in (time, id) order and the next event time.

        ``until_ps`` is :data:`NEXT_WINDOW` (negative) when the engine has no event of its own: the network then
        runs to its next arrival plus its lookahead, less a picosecond (or stays where it is when it has none), and
        says where it stopped in ``window_end_ps``. The engine also accepts deliveries after ``until_ps`` that are already certain, each reported once (a
        remote client of a stateless network answers so: see :class:`~stratasim.remote.NetworkClient`).
        """
        ...

    def cancel(self, flow: int, at_ps: int) -> network_pb2.CancelResult:
        """Take every message of ``flow`` (``SendBatch.flow``) sent and not yet arrived by ``at_ps`` off the network.

        What a failed NPU's job does to the fabric: each such message leaves the queues and links it is in at
        ``at_ps``, their capacity is free from then on for the other flows (what they were given before ``at_ps``
        stays given), and it is never delivered. Returns the ids taken off, in increasing order. ``at_ps`` is later
        than the network's committed time (the last ``advance`` end less the lookahead): the engine calls it at its
        current time, after injecting every message sent before. Each backend's docstring says what it can free.
        """
        ...

    def counters(self) -> network_pb2.LinkCounters:
        """What each link carried so far (empty for networks that do not model links)."""
        ...

    def close(self) -> None:
        """Release resources; the backend is not used afterwards."""
        ...


@runtime_checkable
class DirectNetwork(Protocol):
    """An in-process network whose delays do not depend on traffic (``NetworkInfo.stateless``) and can price a
    message on the spot. The engine then schedules each arrival as it sends, with no time windows; the times
    are those ``inject``/``advance`` would give, so results equal a windowed (or remote) run's. Served remotely,
    such a network prices each batch of the engine's sends in one round trip (``TransitRequest``)."""

    def transit_ps(self, src: int, dst: int, size: int) -> int:
        """Picoseconds from sending ``size`` bytes at ``src`` to their arrival at ``dst``."""
        ...

    def transits_ps(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """:meth:`transit_ps` of many messages at once (int64 arrays, element i describing message i), as a server
        answers a remote engine's ``TransitRequest``; raises BackendError for a source or destination outside the
        network."""
        ...


@runtime_checkable
class ColumnarNetwork(Protocol):
    """An in-process network that also takes a window's sends, and gives its deliveries, as plain Python columns:
    ``inject`` and ``advance`` without building and reading protobuf messages, which on every-NPU runs costs as
    much as deciding the messages. Results are those of ``inject``/``advance``, which remote sessions use."""

    def inject_columns(
        self,
        ids: Sequence[int],
        src: Sequence[int],
        dst: Sequence[int],
        sizes: Sequence[int],
        send_time_ps: Sequence[int],
        flows: Sequence[int] = (),
    ) -> None:
        """``inject`` of the messages whose fields are the columns' elements (element i describing message i);
        ``flows`` empty: every message is flow 0 (``SendBatch.flow``)."""
        ...

    def advance_columns(self, until_ps: int) -> tuple[list[tuple[int, int]], int, int | None]:
        """``advance``: the deliveries as (arrival time, message id) in that order, the window's end, and the time
        of the network's next event (None when it has none)."""
        ...


class LineConflict(Exception):
    """A message crossed a link that a lock-step line had decided ahead of it, no later than the line did: the line's
    crossings were decided out of order, so the engine runs the simulation again message by message."""


class LineLinks(Protocol):
    """A :class:`LineNetwork`'s session: the crossings of lock-step lines decided step by step as arrays."""

    def route(self, src: np.ndarray, dst: np.ndarray, sizes: np.ndarray) -> object | None:
        """The links one step's messages cross (int64 arrays, element i describing message i), or None unless
        each crosses one link of its own."""
        ...

    def arrivals(self, route: object, sent: np.ndarray) -> np.ndarray:
        """Decide now the crossings of one step's messages along ``route`` (from :meth:`route`), sent at ``sent``;
        their arrival times. Raises :class:`LineConflict` when that cannot be decided ahead."""
        ...

    def close(self) -> None:
        """Write the crossings decided back to the network's links."""
        ...


@runtime_checkable
class LineNetwork(Protocol):
    """An in-process network with contended links that can decide a lock-step phase's crossings for whole lines
    of NPUs at once (when each message crosses one link that only its sender feeds), ahead of simulated time; a
    message that later crosses such a link before the line did raises :class:`LineConflict` from ``advance``.
    The results are those of sending every message (the engine re-runs a simulation that conflicts)."""

    def line_session(self) -> LineLinks | None:
        """A session deciding lines' crossings, or None when this run cannot (links that change, cancels, flows
        followed or busy stretches recorded)."""
        ...

    def line_reset(self) -> None:
        """Forget every message and crossing since ``configure``: the engine starts the simulation over."""
        ...


@runtime_checkable
class ComputeBackend(Protocol):
    """A query service pricing operators on a named device; the caller caches results by operator signature."""

    name: str

    def devices(self) -> list[str]:
        """Names of the devices this backend can price."""
        ...

    def estimate(self, request: compute_pb2.EstimateRequest) -> compute_pb2.EstimateResponse:
        """Price every operator of the request, each cost saying its ``basis`` (where its time comes from);
        unknown devices or operators come back as ``error``."""
        ...

    def describe(self, request: compute_pb2.DescribeRequest) -> compute_pb2.DescribeResponse:
        """What the engine needs to know of each device (its memory capacity, or why it is unknown); an unknown
        device comes back as ``error``."""
        ...

    def close(self) -> None:
        """Release resources; the backend is not used afterwards."""
        ...


@runtime_checkable
class SizedWork(Protocol):
    """A compute backend whose cost per operator grows with the operator's sizes says beforehand how much work a
    request is, so a server can refuse one beyond its limit before any work begins (``stratasim serve
    --max-work``). A backend whose cost per operator is a few arithmetic operations whatever the sizes (roofline,
    a measured table) does not implement it."""

    def work(self, request: compute_pb2.EstimateRequest) -> list[int]:
        """For each operator of ``request``, in steps, the most work pricing it adds to the request's (work shared
        with an earlier operator counted there once); cheap, whatever the sizes."""
        ...


@runtime_checkable
class WorkloadSource(Protocol):
    """Yields the per-NPU execution graphs of one workload.

    A workload whose NPU count comes from a parallel plan that must cover the whole machine (a TP x PP x DP
    plan, say) sets the class attribute ``fills_topology = True``: the study then refuses a topology of any
    other size instead of running on part of it.
    """

    name: str

    def npus_required(self) -> int | None:
        """How many NPUs the workload names, or None if it runs on however many the topology has."""
        ...

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        """One graph per NPU, index = NPU id; the same graph object may be shared by symmetric NPUs."""
        ...


@runtime_checkable
class SymmetricWorkload(Protocol):
    """A workload whose NPUs fall into classes that live the same timeline, so the engine may simulate one
    representative per class (PALM's virtual tile aggregation, generalised to sub-groups)."""

    def representatives(self, grid: Grid) -> Sequence[int] | None:
        """For each NPU of ``grid``, the NPU whose graph it runs moved along the topology's dimensions (itself
        if none), or None when the topology breaks the workload's symmetry.

        The claim: NPU ``x`` runs the graph of ``r = representatives[x]`` with every NPU id translated by the
        grid offset from ``r`` to ``x`` — on a grid whose permutable dimensions (``grid.permutable``) are cut into
        the blocks that the representatives' groups holding other NPUs need (:func:`~stratasim.kernel.grid.block_grid`;
        the engine cuts by the groups of the graphs' collectives, so these should be the same). The engine checks
        what it can (each collective group holds one representative and is carried onto itself by those
        translations; point-to-point peers are representatives) and then reads ``graphs(npus)[r]`` for
        representatives only.
        """
        ...


@runtime_checkable
class TrainingWorkload(Protocol):
    """A workload that is one training iteration of a model: the report then adds throughput figures."""

    def model_flops_per_iteration(self) -> float:
        """Model FLOPs of one iteration over all NPUs, counted as Megatron-LM does (recomputation included)."""
        ...

    def samples_per_iteration(self) -> int:
        """Samples (sequences) one iteration trains on: the global batch."""
        ...


@runtime_checkable
class MemoryModel(Protocol):
    """A workload that knows what its NPUs hold at their peak: the report then adds it."""

    def memory_per_npu_bytes(self) -> list[int]:
        """Peak bytes each NPU holds (weights, gradients, optimizer states, activations), index = NPU id."""
        ...


@runtime_checkable
class RoutedWorkload(Protocol):
    """A training workload whose mixture-of-experts layers may drop tokens: the report then adds the drops."""

    def dropped_assignments(self) -> tuple[int, int] | None:
        """Token-to-expert assignments one iteration drops at full experts and routes in all, over every layer
        and rank; None when the workload models no routing."""
        ...


CheckpointWriters = Literal["every_rank", "one_per_shard", "spread"]
"""Who writes a training checkpoint: ``every_rank``, each NPU all the weights and optimizer state it holds
(data-parallel replicas write theirs too); ``one_per_shard``, each model shard (one TP rank of one pipeline stage)
once, by its first data-parallel rank; ``spread``, each model shard once, split evenly over its data-parallel
ranks."""


@runtime_checkable
class CheckpointModel(Protocol):
    """A training workload that knows what a checkpoint of it writes: the goodput model then derives the
    checkpoint's size from it."""

    def checkpoint_bytes_per_npu(self, writers: CheckpointWriters) -> list[int]:
        """The bytes of weights and optimizer state each NPU writes per checkpoint (index = NPU id), as
        ``writers`` shares the writing out."""
        ...


@runtime_checkable
class DeviceBalancedWorkload(Protocol):
    """A workload that can share its work out to its NPUs in proportion to their devices' speed (a training plan
    putting more layers or micro-batches on faster devices). The workload layer cannot price operators, so the
    composition root prices the workload's unit of work on each NPU's device, through the operator pricer, and
    builds the graphs of the workload :meth:`balanced` returns."""

    def balance_unit(self) -> Sequence[compute_pb2.OperatorDesc] | None:
        """The operators of one unit of the work it shares out, or None when it shares nothing out by device."""
        ...

    def balanced(self, unit_ps: Sequence[int]) -> WorkloadSource:
        """The workload with its work shared out, a unit taking ``unit_ps[npu]`` picoseconds on each NPU (index =
        NPU id, every one positive)."""
        ...

    def work_split(self) -> Mapping[str, list[int]] | None:
        """How the work is shared out, for the report (e.g. layers per pipeline stage), when not evenly."""
        ...


@runtime_checkable
class ServingWorkload(Protocol):
    """An inference workload: the report then adds its serving figures (TTFT, TPOT, tokens/s)."""

    def serving_figures(self, milestones: Mapping[str, int], total_time_ps: int) -> dict[str, float]:
        """Figures from the times (ps) at which the graphs' milestone nodes finished, keyed by node name (the
        latest over NPUs), and the run's total time."""
        ...


@dataclass(frozen=True)
class PlacedJob:
    """One job of a study of several: its ``name``, the ``kind`` of its workload, the NPUs it was placed on (its
    rank i on ``npus[i]``), when it starts (ps) and its own workload (``source``), built for ``len(npus)`` NPUs: one
    yielding execution graphs, which the engine runs with the other jobs', or a request-level serving loop, which
    the composition root runs on its own (its NPUs idle in the engine)."""

    name: str
    kind: str
    npus: tuple[int, ...]
    start_ps: int
    source: WorkloadSource | RequestLevelWorkload


@runtime_checkable
class MultiJobWorkload(Protocol):
    """A workload of several jobs sharing the topology, each on NPUs of its own: the report then gives each job's
    figures over its own NPUs and from its own start."""

    def placed_jobs(self, npus: int) -> Sequence[PlacedJob]:
        """The jobs as placed on a topology of ``npus`` NPUs, in the order the study lists them (index = the
        ``job`` field of their NPUs' graphs)."""
        ...
