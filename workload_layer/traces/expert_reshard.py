"""A transformer trace's expert parallelism changed: ``stratasim trace reshard --ep``, at the recorded TP, PP and DP.

The transformer builder places experts as Megatron-core does (:mod:`~stratasim.workload_layer.transformer.moe`): the
``dp`` replicas of a TP rank and stage form ``dp / ep`` EP groups of ``ep`` consecutive DP ranks, each member holding
``E / ep`` experts of every MoE layer, which compute ``ep C`` tokens each (``C``: the capacity from each member) and
``E C`` together whatever ``ep`` is. So, with ``ratio = old EP / new EP``, told by the operator names and groups the
builder writes:

- the expert GEMMs (``expert up``, ``expert down``) keep their FLOPs: their batch (experts on the rank) is scaled by
  ``ratio`` and their tokens (M forward and in ``dgrad``, K in ``wgrad``) by ``1 / ratio``; priced again;
- the MoE all-to-alls keep their size (the rank's buffer of ``E C`` token slots) and run over the new EP group;
  at EP 1 they are dropped (every expert is local);
- the expert gradient all-reduce (``dp expert gradient all-reduce``) carries the rank's expert gradients, scaled by
  ``ratio``, over the new expert-data-parallel group (the ``dp / ep`` ranks at the same position of every EP group);
  dropped when that group is one rank (EP = DP);
- the optimizer step and the resident weights, gradients and optimizer states lose the rank's expert weights
  (counted from the first micro-batch's expert weight-gradient GEMMs: K x N each, their biases left out) and gain
  them times ``ratio``.

What cannot be inferred is refused, saying what: a trace recorded at EP 1 (it has no all-to-alls, whose place and
size would have to be invented) or at EP = DP when the new EP is smaller (it has no expert gradient all-reduce to
scale); a new EP that does not divide DP or the experts; skewed routing (several expert GEMMs of different sizes per
layer: which experts share a rank under the new EP is not recorded); ZeRO; any other change at the same time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.traces.rescale import Plan
from stratasim.workload_layer.transformer.moe import expert_groups

__all__ = ["reshard_experts"]

_EXPERT_GEMMS = frozenset({"expert up", "expert down"})
_EXPERT_REDUCE = "dp expert gradient all-reduce"
_SHARDED_MEMORY = ("weights", "gradients", "optimizer")


def _members(plan: Plan, npu: int, dp_ranks: tuple[int, ...]) -> tuple[int, ...]:
    """The NPUs of ``npu``'s TP rank and stage at the DP ranks ``dp_ranks``."""
    ranks = {axis: plan.layout.rank(npu, axis) for axis in plan.order}
    return tuple(sorted(plan.layout.npu({**ranks, "dp": rank}) for rank in dp_ranks))


def _expert_gemm(op: compute_pb2.OperatorDesc, node_name: str, ratio: Fraction, where: str) -> None:
    """Scale the expert GEMM ``op`` (in place): its experts by ``ratio``, its tokens inversely."""
    gemm = op.gemm
    batch, tokens = gemm.batch or 1, "k" if node_name.endswith(" wgrad") else "m"
    experts, slots = batch * ratio, getattr(gemm, tokens) / ratio
    if experts.denominator != 1 or slots.denominator != 1:
        raise WorkloadError(
            f"{where}: {batch} experts on a rank times the EP ratio {ratio} is not a whole number: the new EP does "
            "not divide the experts"
        )
    before = batch * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
    gemm.batch = 0 if experts == 1 else int(experts)
    setattr(gemm, tokens, int(slots))
    after = int(experts) * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
    op.bytes = op.bytes // before * after


def _expert_weights(graph: workload_pb2.ExecutionGraph, source: str) -> int:
    """The rank's expert weights (elements): its first micro-batch's expert weight-gradient GEMMs, K x N each; more
    than one expert GEMM of a kind in a layer's pass (skewed routing) is refused."""
    seen: set[tuple[str, str]] = set()
    total = 0
    for node in graph.nodes:
        if node.op.name not in _EXPERT_GEMMS or not node.name.startswith("mb0 "):
            continue
        block = node.name.rsplit(" expert ", 1)[0]
        if (block, node.name) in seen:
            raise WorkloadError(
                f"{source}: node {node.id}: several {node.op.name} GEMMs in one pass (skewed routing): which experts "
                "share a rank under a new EP is not recorded, so it cannot be re-sharded"
            )
        seen.add((block, node.name))
        if node.name.endswith(" wgrad"):
            total += node.op.gemm.m * node.op.gemm.n * (node.op.gemm.batch or 1)
    return total


def _optimizer(graph: workload_pb2.ExecutionGraph, scale: Fraction) -> None:
    """Scale ``graph``'s optimizer step (to be priced again) and resident memory by ``scale`` (in place)."""
    for node in graph.nodes:
        if node.HasField("op") and node.op.elementwise.function == compute_pb2.OPTIMIZER:
            op = node.op
            elements = int(op.elementwise.elements * scale)
            op.flops, op.bytes = (
                op.flops // op.elementwise.elements * elements,
                op.bytes // op.elementwise.elements * elements,
            )
            op.elementwise.elements = elements
            node.duration_ps = 0
    for kind in _SHARDED_MEMORY:
        if kind in graph.resident_bytes:
            graph.resident_bytes[kind] = int(graph.resident_bytes[kind] * scale)


def _checked(old: Plan, ep: int, others: Mapping[str, object], source: str) -> None:
    """Refuse, saying what cannot be inferred, a new ``ep`` for a trace recorded under ``old`` with the ``others``
    options (by name; None: not given) changing anything else."""
    changed = " ".join(
        f"--{name} {value}" for name, value in others.items() if value not in (None, getattr(old, name, None))
    )
    if changed:
        raise WorkloadError(
            f"--ep {ep} {changed}: only EP is re-sharded for a MoE trace ({source}), at its recorded tp {old.tp}, "
            f"pp {old.pp} and dp {old.dp}: a new TP changes the tokens each expert computes (sequence parallelism's "
            "gather over TP), and a new PP, DP or schedule re-carves the expert groups out of DP"
        )
    problems = (
        (old.ep == 1, "it was recorded with ep 1: it has no MoE all-to-alls, whose place in each layer would have to "
         "be invented"),
        (old.dp % ep != 0, f"ep {ep} does not divide dp {old.dp} (the EP groups are carved out of the replicas)"),
        (old.zero > 0, f"it was recorded with ZeRO stage {old.zero}, whose per-layer collectives mix dense and expert "
         "shards"),
        (old.ep == old.dp and ep < old.dp, f"it was recorded with ep = dp {old.dp}: it has no expert gradient "
         "all-reduce, whose size cannot be told from the dense one's"),
    )  # fmt: skip
    problem = next((text for found, text in problems if found), None)
    if problem:
        raise WorkloadError(f"--ep {ep}: the trace ({source}) cannot be re-sharded: {problem}")


def _dropped(graph: workload_pb2.ExecutionGraph, drop: set[int]) -> None:
    """Remove the nodes ``drop`` from ``graph`` (in place), a node that depended on one depending on its
    dependencies instead."""
    waits: dict[int, list[int]] = {}
    kept = []
    for node in graph.nodes:
        for field in ("data_deps", "ctrl_deps"):
            deps = list(dict.fromkeys(dep for old in getattr(node, field) for dep in waits.get(old, [old])))
            node.ClearField(field)  # type: ignore[arg-type]
            getattr(node, field).extend(deps)
        if node.id in drop:
            waits[node.id] = list(node.data_deps) + list(node.ctrl_deps)
        else:
            kept.append(node)
    del graph.nodes[:]
    graph.nodes.extend(kept)


def _rank(
    graph: workload_pb2.ExecutionGraph,
    operators: dict[int, compute_pb2.OperatorDesc],
    old: Plan,
    new: Plan,
    source: str,
) -> workload_pb2.ExecutionGraph:
    """``graph`` (recorded in ``source`` under ``old``, its operators by node id) at ``new.ep``."""
    copy = workload_pb2.ExecutionGraph()
    copy.CopyFrom(graph)
    for node in copy.nodes:
        if node.id in operators:
            node.op.CopyFrom(operators[node.id])
    ratio, npu, everyone = Fraction(old.ep, new.ep), graph.npu, tuple(range(old.npus))
    expert_weights = _expert_weights(copy, source)
    dp_rank = old.layout.rank(npu, "dp")
    old_ep, _ = (_members(old, npu, ranks) for ranks in expert_groups(dp_rank, old.dp, old.ep))
    new_ep, new_edp = (_members(new, npu, ranks) for ranks in expert_groups(dp_rank, new.dp, new.ep))
    drop = set()
    for node in copy.nodes:
        members = tuple(sorted(node.group)) or everyone
        if node.type == workload_pb2.COMP_NODE and node.op.name in _EXPERT_GEMMS:
            _expert_gemm(node.op, node.name, ratio, f"{source}: node {node.id}")
            node.duration_ps = 0
        elif (
            node.type == workload_pb2.COMM_COLL_NODE and node.comm_type == workload_pb2.ALL_TO_ALL and members == old_ep
        ):
            drop |= {node.id} if new.ep == 1 else set()
            node.ClearField("group")
            node.group.extend(() if new_ep == everyone else new_ep)
            node.pg_name = ""  # named again, one name per group, when written
        elif node.type == workload_pb2.COMM_COLL_NODE and node.name == _EXPERT_REDUCE:
            drop |= {node.id} if len(new_edp) == 1 else set()
            node.comm_bytes = int(node.comm_bytes * ratio)
            node.ClearField("group")
            node.group.extend(() if new_edp == everyone else new_edp)
            node.pg_name = ""
    optimizer = next((op for op in operators.values() if op.elementwise.function == compute_pb2.OPTIMIZER), None)
    if optimizer is not None and optimizer.elementwise.elements:
        elements = optimizer.elementwise.elements
        _optimizer(copy, Fraction(elements - expert_weights + expert_weights * ratio, elements))
    _dropped(copy, drop)
    return copy


def reshard_experts(
    graphs: list[workload_pb2.ExecutionGraph],
    sources: list[str],
    operators: list[dict[int, compute_pb2.OperatorDesc]],
    old: Plan,
    ep: int,
    others: Mapping[str, object],
) -> tuple[list[workload_pb2.ExecutionGraph], Plan]:
    """Every rank's graph (recorded in ``sources`` under ``old``, with its operators by node id) at ``ep``, and the
    new plan; the expert GEMMs and optimizer steps hold their new operators and a duration of 0, to be priced.
    ``others`` are the other options by name (None: not given), which must not change the plan."""
    _checked(old, ep, others, sources[0])
    new = replace(old, ep=ep)
    return [_rank(g, ops, old, new, source) for g, ops, source in zip(graphs, operators, sources, strict=True)], new
