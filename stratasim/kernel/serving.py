"""The serving seam: what a request-level serving loop asks to be priced, and the contracts of whoever prices it.

A serving workload does not yield execution graphs: it runs its own request-level loop (requests, batching, the KV
cache) and asks, for each iteration a replica runs, how long it takes. The loop lives in the workload layer and is
pure; the pricing lives in the system layer (:mod:`stratasim.system_layer.serving`: operators through the operator
pricer, collectives and KV moves through the system and network layers); the composition root wires one to the
other. Both sides speak this module's vocabulary:

- an :class:`Iteration` of a replica: its :class:`IterationShape` (what the scheduler batched) and its works (the
  steps each pipeline stage runs: :class:`Compute` operators, :class:`TensorParallelCollective` collectives),
  priced by an :class:`IterationPricer`;
- under expert parallelism, an :class:`ExpertWork` (a group's local experts and its :class:`ExpertAllToAll`
  dispatch and combine), priced by an :class:`ExpertPricer`;
- disaggregated, the :class:`KvMove` of handed-off requests' KV caches between replicas, priced by a
  :class:`KvTransferPricer`.

Times are integer picoseconds, sizes bytes. A workload served this way is a :class:`RequestLevelWorkload`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

from stratasim.kernel.counters import CounterSample
from stratasim.v1 import compute_pb2, workload_pb2

__all__ = [
    "Compute",
    "TensorParallelCollective",
    "Layer",
    "Step",
    "IterationShape",
    "IterationWork",
    "Iteration",
    "ExpertAllToAll",
    "ExpertWork",
    "KvMove",
    "kv_slices",
    "IterationPricer",
    "ExpertPricer",
    "KvTransferPricer",
    "PoolPricers",
    "ServingPool",
    "ServingResult",
    "RequestLevelWorkload",
]


@dataclass(frozen=True)
class Compute:
    """An operator on the compute stream; ``memory_bytes`` is what it allocates when it starts (the KV cache it
    writes)."""

    name: str
    op: compute_pb2.OperatorDesc
    memory_bytes: int = 0


@dataclass(frozen=True)
class TensorParallelCollective:
    """A collective over the stage's TP group (``comm_bytes``: the whole buffer) that the next step waits for;
    not run when the group is one NPU."""

    name: str
    kind: workload_pb2.CollectiveType.ValueType
    comm_bytes: int


@dataclass(frozen=True)
class Layer:
    """A layer's operations in a pass, named within the layer: emitted once as a graph block and run by a block
    node named after the layer, so the identical layers of a pass (the same ``steps`` object) share one block."""

    name: str
    steps: tuple[Compute | TensorParallelCollective, ...]


Step: TypeAlias = Compute | TensorParallelCollective | Layer
"""One operation of a pass, or one of its layers."""


@dataclass(frozen=True, order=True)
class IterationShape:
    """What one iteration runs: ``chunks`` of prompts as ``(new tokens, context after them)`` pairs, sorted;
    ``decodes`` sequences decoding ``queries`` tokens each (1, or with speculative decoding the ``k + 1`` the target
    verifies) at mean context ``decode_context`` (after them); ``samples`` sequences producing a token (every
    decode, and each chunk that ends its prompt)."""

    chunks: tuple[tuple[int, int], ...]
    decodes: int
    decode_context: int
    samples: int
    queries: int = 1

    @property
    def tokens(self) -> int:
        """New tokens the iteration runs through the model."""
        return sum(tokens for tokens, _ in self.chunks) + self.decodes * self.queries


@dataclass(frozen=True)
class IterationWork:
    """The operators of an iteration on one TP rank of each pipeline stage, as ``(times, step)`` pairs (a step
    run ``times`` times: once per layer of its kind), the activation each stage hands the next, and the TP degree
    its collectives span; ``blocks``, when known, names for each stage's each step the blocks it runs once in
    (``times`` names: ``embedding``, ``layer<i>``, ``head``), which the per-layer breakdown sums by."""

    stages: tuple[tuple[tuple[int, Step], ...], ...]
    boundary_bytes: int
    tp: int = 1
    blocks: tuple[tuple[tuple[str, ...], ...], ...] = ()


@dataclass(frozen=True)
class Iteration:
    """One iteration of a replica: its ``shape`` and what it runs, as ``(times, work)`` pairs run one after another
    (a model's pass; with speculative decoding the draft's passes first). A loop run without a model (a test's)
    hands its shape alone."""

    shape: IterationShape
    works: tuple[tuple[int, IterationWork], ...] = ()


@dataclass(frozen=True)
class ExpertAllToAll:
    """A token dispatch or combine all-to-all among the corresponding NPUs of an expert-parallel group's members,
    ``comm_bytes`` the buffer each sends from, ``peer_shares`` the share of it each member receives (its experts'
    share of the tokens: an all-to-all-v, :func:`~stratasim.kernel.collective_types.uneven_all_to_all_bytes`;
    none: ``1 / ep`` each, one staying home)."""

    name: str
    comm_bytes: int
    peer_shares: tuple[Fraction, ...] = ()


@dataclass(frozen=True)
class ExpertWork:
    """The expert part of an iteration of an ``ep``-way group running ``group_tokens`` new tokens,
    ``member_tokens`` on its busiest member: on one NPU of each member, as ``(times, step)`` pairs, the local
    experts' operators and the all-to-alls, ``times`` the mixture-of-experts layers (none from a loop run without
    a model); ``blocks``, when known, names for each step the layers it runs in (``times`` names, ``layer<i>``).
    """

    group_tokens: int
    member_tokens: int
    ep: int
    steps: tuple[tuple[int, Compute | ExpertAllToAll], ...] = ()
    blocks: tuple[tuple[str, ...], ...] = ()


class KvMove(NamedTuple):
    """A KV-cache move to replica ``destination`` of ``tokens`` cached tokens (``size`` bytes, all its NPUs
    together)."""

    destination: int
    tokens: int
    size: int


def kv_slices(size: int, senders: int, receivers: int) -> list[tuple[int, int, int]]:
    """How a KV move of ``size`` bytes crosses from a replica of ``senders`` NPUs to one of ``receivers``: as
    ``max(senders, receivers)`` equal slices (the first ``size mod slices`` a byte larger), slice ``k`` from the
    source's NPU ``k mod senders`` to the destination's ``k mod receivers`` (the same plan on both sides pairs NPU
    ``i`` with NPU ``i``), as ``(sender, receiver, bytes)`` in slice order."""
    slices = max(senders, receivers)
    return [(k % senders, k % receivers, size // slices + (k < size % slices)) for k in range(slices)]


class IterationPricer(Protocol):
    """Prices one iteration of a replica: how long it takes, in picoseconds, or on a replica of several pipeline
    stages how long each stage takes (their sum the whole iteration's time)."""

    def __call__(self, iteration: Iteration) -> int | tuple[int, ...]: ...


class ExpertPricer(Protocol):
    """Prices the expert part of an iteration of an expert-parallel group, in picoseconds."""

    def __call__(self, work: ExpertWork) -> int: ...


class KvTransferPricer(Protocol):
    """Prices KV-cache moves started together from replica ``source``: picoseconds until each move has arrived."""

    def __call__(self, source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class PoolPricers:
    """What prices a pool's iterations: its :class:`IterationPricer` and, for an expert-parallel pool, the
    :class:`ExpertPricer` of its groups' expert parts (its iteration pricer then pricing the rest)."""

    iteration: IterationPricer
    experts: ExpertPricer | None = None
    energy: Callable[[Iteration], float] | None = None
    """The compute energy (pJ) an iteration takes on every NPU of a replica, when the pricer knows it."""
    expert_energy: Callable[[ExpertWork], float] | None = None
    """The compute energy (pJ) of an expert part on every NPU of a group, when the pricer knows it."""


@dataclass(frozen=True)
class ServingPool:
    """A pool as its pricers see it: ``replicas`` replicas on consecutive NPUs from ``first_npu``, each ``tp * pp``
    NPUs (``ep`` of them in an expert-parallel group), on its own compute ``device`` as the study wrote it (a name
    or a mapping describing one; None: the study's)."""

    name: str
    device: str | Mapping[str, object] | None
    first_npu: int
    replicas: int
    tp: int = 1
    pp: int = 1
    ep: int = 1

    def npus(self) -> range:
        """The pool's NPUs, replica after replica."""
        return range(self.first_npu, self.first_npu + self.replicas * self.tp * self.pp)

    def replica_npus(self) -> list[range]:
        """The NPUs of each replica, in order."""
        size = self.tp * self.pp
        return [
            range(self.first_npu + index * size, self.first_npu + (index + 1) * size) for index in range(self.replicas)
        ]


@dataclass(frozen=True)
class ServingResult:
    """What a request-level run produced, for the report: when the last request finished (ps), the NPUs its
    replicas occupy, the iterations run (``events_processed``), its figures (times in ps) and timeline, each pool's
    KV-cache bytes per NPU, and with the trace each replica's batch size, queue length and KV blocks in use as
    counters of its first NPU; ``compute_energy_pj`` the energy its operators took on every NPU (0 when the
    pricers know none)."""

    total_time_ps: int
    npus: int
    events_processed: int
    figures: dict[str, float]
    timeline: dict[str, list[float]]
    kv_bytes_per_pool: tuple[int, ...] = ()
    counters: tuple[CounterSample, ...] = ()
    compute_energy_pj: float = 0.0


@runtime_checkable
class RequestLevelWorkload(Protocol):
    """A workload that runs its own request-level loop, given pricers, instead of yielding execution graphs: the
    composition root builds a :class:`PoolPricers` per pool of :meth:`pools` (:mod:`stratasim.system_layer.serving`)
    and a :class:`KvTransferPricer`, and hands them to :meth:`serve`."""

    name: str

    def npus_required(self) -> int | None:
        """How many NPUs the workload's replicas occupy."""
        ...

    def pools(self) -> Sequence[ServingPool]:
        """Its pools, on consecutive disjoint NPU ranges in order."""
        ...

    def kv_bytes_per_token(self) -> int:
        """Bytes of one cached token's keys and values over a whole replica (what a KV move carries per token)."""
        ...

    def demand(self, most: int | None = None) -> tuple[int, int]:
        """The requests it serves and the output tokens they generate at most (about an iteration each), known
        before any request is drawn when it can be (for budgets); reading requests stops past ``most`` of them,
        the count then ``most + 1``."""
        ...

    def serve(
        self,
        pricers: Sequence[PoolPricers],
        capacities: Sequence[tuple[int | None, str]],
        transfer: KvTransferPricer | None,
        counters: bool = False,
        runs: list[Any] | None = None,
    ) -> ServingResult:
        """Serve the requests, each pool's iterations priced by ``pricers`` (in :meth:`pools`' order), each NPU of
        a pool holding ``capacities`` bytes (None: unknown, and why), KV moves priced by ``transfer``; with
        ``counters`` the result carries them; with ``runs``, the record of the loop's run (the workload's own type,
        for a replay of it) appended to it."""
        ...
