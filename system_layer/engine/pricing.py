"""Pricing a study's operators: every distinct operator asked of the operator pricer once, in one batch.

What comes back is each plan's node durations and compute energy (what the executors run on), and one
:class:`~stratasim.system_layer.result.OperatorStats` per distinct operator with how many times the study runs it (what
the report's operator table shows: the bound, time and energy of every operator).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from stratasim.kernel.graph_blocks import unpriced
from stratasim.kernel.operator_shapes import ShapeError, shape_of
from stratasim.kernel.operators import basis_name, dtype_name, kind_name, kind_of
from stratasim.system_layer.engine.contention import Contention
from stratasim.system_layer.engine.graph_plan import GraphPlan
from stratasim.system_layer.operators import OperatorPricer, signature
from stratasim.system_layer.result import OperatorStats
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.v1.compute_pb2 import OperatorCost, OperatorDesc

__all__ = ["Pricing", "price_devices", "price_plans"]

# Names kept per distinct operator: enough to tell what it is, bounded for traces naming every node apart.
_MAX_NAMES = 8


@dataclass(frozen=True)
class Pricing:
    """Keyed by plan: node durations by position (fixed ones as given) and the picojoules its priced
    operators take in all (fixed-duration nodes carry no energy); ``counts`` says how many times each plan runs
    each distinct operator (by key: its signature, tagged with its device when the study runs several), for
    :meth:`operator_stats`; ``ops`` holds each distinct operator with its names, cost and device (empty on a
    study of one device); ``slow``, for the plans on a device whose collectives slow its compute, how many times
    longer each node takes while they run (:mod:`stratasim.system_layer.engine.contention`)."""

    durations: Mapping[GraphPlan, tuple[int, ...]]
    energies: Mapping[GraphPlan, float]
    counts: Mapping[GraphPlan, Counter[bytes]]
    ops: Mapping[bytes, tuple[compute_pb2.OperatorDesc, list[str], compute_pb2.OperatorCost, str]]
    slow: Mapping[GraphPlan, tuple[float, ...]] = field(default_factory=dict)

    def operator_stats(
        self,
        plan_runs: Mapping[GraphPlan, int],
        reductions: Iterable[tuple[OperatorDesc, OperatorCost, int, str]] = (),
    ) -> tuple[OperatorStats, ...]:
        """One row per distinct operator (and device), counting each plan as run ``plan_runs[plan]`` times (by how
        many NPUs follow it), plus the collectives' priced ``reductions`` (operator, cost, runs, device); most time
        first."""
        totals: Counter[bytes] = Counter()
        for plan, runs in plan_runs.items():
            for key, count in self.counts[plan].items():
                totals[key] += count * runs
        rows = [
            _row(op, names, cost, totals[key], on) for key, (op, names, cost, on) in self.ops.items() if totals[key]
        ]
        rows += [_row(op, [op.name], cost, count, on) for op, cost, count, on in reductions if count]
        return tuple(sorted(rows, key=lambda row: (-row.count * row.duration_ps, row.names, row.shape, row.device)))


def _row(
    op: compute_pb2.OperatorDesc, names: list[str], cost: compute_pb2.OperatorCost, count: int, device: str
) -> OperatorStats:
    bound = compute_pb2.Bound.Name(cost.bound).lower() if cost.bound in compute_pb2.Bound.values() else ""
    return OperatorStats(
        names=tuple(names),
        kind="" if kind_of(op) == compute_pb2.OPERATOR_KIND_UNSPECIFIED else kind_name(kind_of(op)),
        shape=_dims(op),
        dtype=dtype_name(op.dtype),
        flops=op.flops,
        bytes=op.bytes,
        count=count,
        duration_ps=cost.duration_ps,
        energy_pj=cost.energy_pj,
        bound="" if bound == "bound_unspecified" else bound,
        traffic=tuple((t.level, t.bytes) for t in cost.traffic),
        basis=basis_name(cost.basis),
        device=device,
    )


def _dims(op: compute_pb2.OperatorDesc) -> tuple[int, ...]:
    """The sizes a table shows for ``op`` (see ``Shape.dims``); none for an operator priced by its totals alone."""
    try:
        return shape_of(op).dims()
    except ShapeError:
        return ()


class _OperatorKeys:
    """Every plan reached from the plans visited, and each node's operator signature (None for other nodes), with
    the distinct operators and the names they go by; an operator node with no backend to price it is an error."""

    def __init__(self, priced: bool) -> None:
        self._priced = priced
        self.unique: dict[bytes, tuple[compute_pb2.OperatorDesc, list[str]]] = {}
        self.keys: dict[GraphPlan, list[bytes | None]] = {}
        self._signatures: dict[bytes, bytes] = {}  # an operator as written (its name included) -> what prices it
        # A node's signature by the node's identity: an inlined plan holds its blocks' node objects once per block
        # node (a replayed serving job's: millions), each serialised once. The plans hold the nodes while keyed.
        self._of_node: dict[int, bytes] = {}

    def visit(self, plan: GraphPlan, scope: str = "") -> None:
        """Key every node of ``plan``, and of each block at its first block node: operators are named in the
        order the unrolled graph runs them."""
        plan_keys: list[bytes | None] = []
        self.keys[plan] = plan_keys
        compute, block, blocks, runs = workload_pb2.COMP_NODE, workload_pb2.BLOCK_NODE, plan.blocks, plan.block_runs
        for index, (node, kind) in enumerate(zip(plan.nodes, plan.kinds)):
            if kind != compute or not node.HasField("op"):
                plan_keys.append(None)
                if kind == block and blocks[runs[index]] not in self.keys:
                    self.visit(blocks[runs[index]], plan.name(index))
                continue
            if not self._priced:
                raise unpriced(node, plan.foreign_names)
            key = self._of_node.get(id(node))
            if key is None:
                key = self._of_node[id(node)] = self._key(node.op)
            names = self.unique[key][1]
            if len(names) < _MAX_NAMES:  # the first few distinct names, in the order the unrolled graph runs them
                name = node.op.name or (f"{scope} {plan.name(index)}" if scope else plan.name(index))
                if name not in names:
                    names.append(name)
            plan_keys.append(key)

    def _key(self, op: compute_pb2.OperatorDesc) -> bytes:
        """``op``'s signature, recording it among the distinct."""
        written = op.SerializeToString(deterministic=True)
        key = self._signatures.get(written)
        if key is None:
            key = self._signatures[written] = signature(op)
        if key not in self.unique:
            self.unique[key] = (op, [])
        return key


def price_devices(
    plans: Mapping[str, Sequence[GraphPlan]],
    pricers: Mapping[str, OperatorPricer] | None,
    contention: Mapping[str, Contention] | None = None,
) -> Pricing:
    """Price each device's ``plans`` with its pricer (``pricers[device]``; None: no compute backend), each distinct
    operator once per device, with the device's ``contention`` where it has one. A study of one device is priced as
    :func:`price_plans` does; with several, each operator's key is its signature tagged with its device, and its row
    names the device."""
    several = len(plans) > 1
    contended = contention or {}
    parts = {
        device: price_plans(
            listed, None if pricers is None else pricers[device], device if several else "", contended.get(device)
        )
        for device, listed in plans.items()
    }
    if not several:
        return next(iter(parts.values()))
    durations: dict[GraphPlan, tuple[int, ...]] = {}
    energies: dict[GraphPlan, float] = {}
    counts: dict[GraphPlan, Counter[bytes]] = {}
    ops: dict[bytes, tuple[compute_pb2.OperatorDesc, list[str], compute_pb2.OperatorCost, str]] = {}
    slow: dict[GraphPlan, tuple[float, ...]] = {}
    for device, part in parts.items():
        tag = device.encode() + b"\0"  # device names hold no NUL: tagged keys of two devices never meet
        durations.update(part.durations)
        energies.update(part.energies)
        counts.update({plan: Counter({tag + key: n for key, n in got.items()}) for plan, got in part.counts.items()})
        ops.update({tag + key: row for key, row in part.ops.items()})
        slow.update(part.slow)
    return Pricing(durations, energies, counts, ops, slow)


def price_plans(
    plans: Sequence[GraphPlan], pricer: OperatorPricer | None, device: str = "", contention: Contention | None = None
) -> Pricing:
    """Price every operator node of ``plans`` and of their blocks with ``pricer``; a node to price without one is
    an error. A plan's counts and energy include its block nodes' blocks, once per block node; ``device`` names
    the device in the operator rows (empty: the study's one device). With ``contention``, each node's slow-down
    while collectives run, by its operator's bound (a node of fixed duration: none)."""
    keyed = _OperatorKeys(pricer is not None)
    for plan in plans:
        keyed.visit(plan)
    costs: dict[bytes, compute_pb2.OperatorCost] = {}
    if keyed.unique and pricer is not None:
        costs = pricer.costs_by_signature({key: op for key, (op, _) in keyed.unique.items()})
    duration_of = {key: cost.duration_ps for key, cost in costs.items()}
    durations = {
        plan: tuple(node.duration_ps if key is None else duration_of[key] for node, key in zip(plan.nodes, plan_keys))
        for plan, plan_keys in keyed.keys.items()
    }
    own = {plan: Counter(key for key in plan_keys if key is not None) for plan, plan_keys in keyed.keys.items()}
    counts = {plan: _with_blocks(plan, own) for plan in plans}
    energies = {plan: _energy(plan_counts, costs) for plan, plan_counts in counts.items()}
    ops = {key: (op, names, costs[key], device) for key, (op, names) in keyed.unique.items()}
    slow = {}
    if contention is not None:
        factor_of = {key: contention.factor(cost.bound) for key, cost in costs.items()}
        slow = {
            plan: tuple(1.0 if key is None else factor_of[key] for key in keys) for plan, keys in keyed.keys.items()
        }
    return Pricing(durations, energies, counts, ops, slow)


def _with_blocks(plan: GraphPlan, own: Mapping[GraphPlan, Counter[bytes]]) -> Counter[bytes]:
    """The operators ``plan`` runs: its own, and its blocks' once per block node that runs them."""
    total = Counter(own[plan])
    if plan.blocks:
        for block, runs in Counter(plan.block_runs.values()).items():
            for key, count in own[plan.blocks[block]].items():
                total[key] += count * runs
    return total


def _energy(counts: Counter[bytes], costs: Mapping[bytes, compute_pb2.OperatorCost]) -> float:
    """Picojoules of ``counts`` runs of each operator, summed exactly (then rounded once), so the total is the
    same float however the graph groups its nodes into blocks."""
    return float(sum((Fraction(costs[key].energy_pj) * count for key, count in counts.items()), Fraction(0)))
