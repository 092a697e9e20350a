"""A serving pool's iterations priced by the layers below: operators by the compute backend (through the
:class:`~stratasim.system_layer.operators.OperatorPricer`), collectives and pipeline transfers by the system layer on
the network.

Each TP collective of an iteration runs on the pool's first replica's TP group (the first ``tp`` of the pool's NPUs,
given replica after replica) and each pipeline transfer from its first NPU to the pool's ``tp``-th (the next stage's
same TP rank), each
distinct operator and message priced once (a collective at its size rounded up to 1/32 of a power of two,
:func:`~stratasim.system_layer.serving.kv_transfer.quantised`). An expert-parallel pool's expert parts
(:meth:`BackendPricer.experts`) are its local experts' operators and, for each mixture-of-experts layer, the
dispatch and combine all-to-alls, run by the system layer on the pool's first group: ``tp`` all-to-alls at once, the
``k``-th among the ``k``-th NPUs of the group's ``ep`` replicas, sharing the network. Under skewed routing these are
all-to-all-v's, every member receiving its experts' share of each sender's buffer: each is priced as the even
all-to-all whose messages are all the busiest member's
(:func:`~stratasim.kernel.collective_types.uneven_all_to_all_bytes`: exact with the direct algorithm on the
analytical network and through a switch, an upper bound with relaying algorithms). The pool's NPUs may be any ids
of the topology (a serving job placed on NPUs of its own), in the order its replicas take them. A stage's part of an iteration
is the sum of its operators and collectives, one after another as a rank runs them, plus the transfer of the
activation into it; the serving loop pipelines a replica's batches through its stages.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from stratasim.kernel.collective_types import uneven_all_to_all_bytes
from stratasim.kernel.serving import Compute, ExpertAllToAll, ExpertWork, Iteration, TensorParallelCollective
from stratasim.system_layer.operators import OperatorPricer
from stratasim.system_layer.serving.graphs import add_collective, add_message
from stratasim.system_layer.serving.kv_transfer import quantised
from stratasim.system_layer.serving.sessions import NetworkSessions
from stratasim.v1 import workload_pb2

__all__ = ["BackendPricer"]


class BackendPricer:
    """Prices iterations (an :class:`~stratasim.kernel.serving.IterationPricer`) and expert parts (its
    :meth:`experts`, an :class:`~stratasim.kernel.serving.ExpertPricer`) of a pool on the NPUs ``npus`` (replica
    after replica, each ``tp * pp`` of them; its first ``ep`` replicas at least) whose replicas run ``tp``, ``pp``
    and ``ep``-way: operators with ``operators``, TP collectives, pipeline transfers and all-to-alls on
    ``network``; caches every message it priced."""

    def __init__(
        self,
        operators: OperatorPricer,
        network: NetworkSessions,
        npus: Sequence[int],
        tp: int = 1,
        pp: int = 1,
        ep: int = 1,
    ) -> None:
        self._operators, self._network = operators, network
        self._npus, self._tp, self._pp, self._ep = tuple(npus), tp, pp, ep
        self._messages: dict[tuple[str, int, int], int] = {}

    def _durations(self, iteration: Iteration) -> Iterator[int]:
        """Picoseconds of ``iteration``'s operators, priced in one batch, in the order its works, stages and steps
        list them."""
        ops = [
            step.op
            for _, work in iteration.works
            for stage in work.stages
            for _, step in stage
            if isinstance(step, Compute)
        ]
        return iter(self._operators.durations_ps(ops))

    def __call__(self, iteration: Iteration) -> int | tuple[int, ...]:
        """Picoseconds ``iteration`` takes, or with pipeline stages each stage's part, the transfer of the
        activation into it included (module docstring)."""
        durations = self._durations(iteration)  # in the order the loops below meet the operators
        stages = [0] * self._pp
        for repeats, work in iteration.works:
            for index, stage in enumerate(work.stages):
                for times, step in stage:
                    if isinstance(step, Compute):
                        stages[index] += repeats * times * next(durations)
                    elif isinstance(step, TensorParallelCollective) and work.tp > 1:
                        stages[index] += repeats * times * self._collective(step, work.tp)
                if index:
                    stages[index] += repeats * self._transfer(work.boundary_bytes)
        return stages[0] if self._pp == 1 else tuple(stages)

    def by_block(self, iteration: Iteration) -> dict[tuple[int, str, str], int]:
        """Picoseconds of ``iteration`` by (stage, block, communicator): each step's time charged to each block it
        runs in (its work's ``blocks``; ``other`` when unnamed), compute under communicator ``""``, TP collectives
        under ``tp``, the activation's transfer into a stage to block ``pipeline`` under ``pp``. A stage's values
        sum to its time as :meth:`__call__` gives it, to the picosecond."""
        durations = self._durations(iteration)  # in the order the loops below meet the operators
        parts: defaultdict[tuple[int, str, str], int] = defaultdict(int)
        for repeats, work in iteration.works:
            for index, stage in enumerate(work.stages):
                names = work.blocks[index] if work.blocks else [("other",) * times for times, _ in stage]
                for (_, step), blocks in zip(stage, names, strict=True):
                    if isinstance(step, Compute):
                        ps, communicator = next(durations), ""
                    elif isinstance(step, TensorParallelCollective) and work.tp > 1:
                        ps, communicator = self._collective(step, work.tp), "tp"
                    else:
                        continue
                    for block in blocks:
                        parts[index, block, communicator] += repeats * ps
                if index:
                    parts[index, "pipeline", "pp"] += repeats * self._transfer(work.boundary_bytes)
        return dict(parts)

    def experts_by_block(self, work: ExpertWork) -> dict[tuple[str, str], int]:
        """Picoseconds of the expert part ``work`` by (layer, communicator) as :meth:`by_block` gives an
        iteration's, all-to-alls under ``ep``; the values sum to :meth:`experts`'s figure."""
        computes = (step.op for _, step in work.steps if isinstance(step, Compute))
        durations = iter(self._operators.durations_ps(computes))
        names = work.blocks or tuple(("other",) * times for times, _ in work.steps)
        parts: defaultdict[tuple[str, str], int] = defaultdict(int)
        for (_, step), blocks in zip(work.steps, names, strict=True):
            ps, communicator = (next(durations), "") if isinstance(step, Compute) else (self._all_to_all(step), "ep")
            for block in blocks:
                parts[block, communicator] += ps
        return dict(parts)

    def energy_pj(self, iteration: Iteration) -> float:
        """The compute energy of ``iteration`` on every NPU of a replica: each stage's operators on each of its
        ``tp`` NPUs (collectives' and transfers' energy is the network's, priced per bit elsewhere)."""
        return sum(
            repeats * times * work.tp * cost.energy_pj
            for repeats, work in iteration.works
            for stage in work.stages
            for times, step in stage
            if isinstance(step, Compute)
            for cost in self._operators.costs([step.op])
        )

    def expert_energy_pj(self, work: ExpertWork) -> float:
        """The compute energy of an expert part on every NPU of a group: its local experts' operators on each of
        the ``ep`` members' ``tp`` NPUs."""
        computes = [(times, step.op) for times, step in work.steps if isinstance(step, Compute)]
        costs = self._operators.costs(op for _, op in computes)
        return self._ep * self._tp * sum(times * cost.energy_pj for (times, _), cost in zip(computes, costs))

    def experts(self, work: ExpertWork) -> int:
        """Picoseconds of the expert part ``work`` of an iteration of an expert-parallel group (module
        docstring)."""
        durations = iter(self._operators.durations_ps(step.op for _, step in work.steps if isinstance(step, Compute)))
        return sum(
            times * (next(durations) if isinstance(step, Compute) else self._all_to_all(step))
            for times, step in work.steps
        )

    def _collective(self, step: TensorParallelCollective, tp: int) -> int:
        """A collective over the first ``tp`` NPUs of the first replica, simulated alone by the system layer."""
        size = quantised(step.comm_bytes)
        key = (
            ("collective", int(step.kind), size) if tp == self._tp else (f"collective over {tp}", int(step.kind), size)
        )
        if key not in self._messages:
            group = self._npus[:tp]
            graphs = _graphs(group)
            for npu in group:
                add_collective(graphs[npu], step.name, step.kind, size, group, "tp")
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _all_to_all(self, step: ExpertAllToAll) -> int:
        """The ``tp`` all-to-alls of the pool's first expert-parallel group, each among the same TP rank of its
        ``ep`` replicas, simulated together; an uneven one (``peer_shares``) as the even all-to-all whose every
        message is as large as its busiest peer's."""
        size = quantised(uneven_all_to_all_bytes(step.comm_bytes, step.peer_shares))
        key = ("all-to-all", int(workload_pb2.ALL_TO_ALL), size)
        if key not in self._messages:
            width = self._tp * self._pp
            graphs = _graphs(self._npus[: self._ep * width])
            for rank in range(self._tp):
                group = [self._npus[member * width + rank] for member in range(self._ep)]
                for npu in group:
                    add_collective(graphs[npu], step.name, workload_pb2.ALL_TO_ALL, size, group, "ep")
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _transfer(self, size: int) -> int:
        """A stage's activation from the pool's first NPU to its ``tp``-th (the next stage's same TP rank),
        simulated alone."""
        key = ("transfer", 0, size)
        if key not in self._messages:
            first, last = self._npus[0], self._npus[self._tp]
            graphs = _graphs((first, last))
            add_message(graphs[first], "activation", workload_pb2.COMM_SEND_NODE, last, 0, size, "pp")
            add_message(graphs[last], "activation", workload_pb2.COMM_RECV_NODE, first, 0, size, "pp")
            self._messages[key] = self._simulate(graphs)
        return self._messages[key]

    def _simulate(self, graphs: list[workload_pb2.ExecutionGraph]) -> int:
        return self._network.simulate(graphs).total_time_ps

    @property
    def distinct(self) -> tuple[int, int]:
        """Operators and messages priced so far."""
        return self._operators.distinct, len(self._messages)


def _graphs(npus: Sequence[int]) -> list[workload_pb2.ExecutionGraph]:
    """Empty graphs for NPUs 0 up to the highest of ``npus``, to which the priced nodes are added."""
    return [workload_pb2.ExecutionGraph(npu=npu) for npu in range(max(npus) + 1)]
