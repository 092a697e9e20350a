"""``stratasim trace reshard``: a Chakra trace recorded under one tensor-, pipeline- and data-parallel plan turned
into the trace of another, its operators split or merged by their shapes and its collectives resized and regrouped
(TP and DP here, then the pipeline re-cut by :mod:`.pipeline_cut` when PP or the schedule changes; EP alone by
:mod:`.expert_reshard`).

What it needs from the trace: the plan (``stratasim.parallelism.*`` metadata, as :mod:`.rescale` reads it) and,
on every compute node whose work depends on TP, the operator its duration was priced from (the ``stratasim.op``
attribute ``stratasim trace export`` writes). Each operator is split or merged by the rules of
:mod:`.shard_rules`; a compute node without one (a trace converted from PyTorch) has its operator read from its
ATen name and tensor shapes by :mod:`.torch_operators`, a CPU operator kept as recorded. This module leaves the
new operators' durations at 0 for the caller to price (``stratasim.study.reshard`` prices them with a study's
compute section, as an export does).

Communication, told apart by the group it runs over (the comm pattern, not the node names):

- TP collectives keep their size: a TP all-reduce (or sequence parallelism's reduce-scatter / all-gather) carries
  the whole activation at any TP. Sequence parallelism is recognised by those reduce-scatters and all-gathers.
- DP collectives (the gradient all-reduce buckets, ZeRO's reduce-scatters and all-gathers) carry the rank's
  parameters' gradients, scaled by ``old TP / new TP`` (the replicated norms and position embeddings are
  scaled with them: 2 % of the DP payload of the tests' small GPT, less for wider models). Their number stays:
  the buckets are not re-cut.
- Point-to-point transfers (pipeline stages' activations) keep their size: Megatron-LM sends the whole activation
  from every TP rank.
- Groups are rebuilt for the new TP x PP x DP layout (:func:`.rescale.regroup`); the resident weights, gradients
  and optimizer states scale like the DP collectives. Activation memory (``memory_bytes``) is kept as recorded.

New rank ``r'`` runs the recorded graph of the rank with TP rank ``r'_tp mod old TP``, the same PP rank and DP rank
``r'_dp mod old DP``, re-sharded. What cannot be inferred, and so is refused: a new TP, PP, DP or schedule under
expert parallelism (the expert groups are carved out of DP; a new EP alone is re-sharded), an operator the rules cannot place or whose split dimension the new TP does not divide, a
trace without operators when TP or PP changes, and what :mod:`.pipeline_cut` refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from stratasim.chakra.et_def_pb2 import Node
from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.traces.chakra import OP_ATTR, read_trace, trace_files
from stratasim.workload_layer.traces.expert_reshard import reshard_experts
from stratasim.workload_layer.traces.pipeline_cut import Schedule, recut
from stratasim.workload_layer.traces.rescale import Plan, read_planned, regroup, target_plan
from stratasim.workload_layer.traces.shard_rules import rescaled_operator
from stratasim.workload_layer.traces.torch_operators import (
    ModelDimensions,
    has_tensors,
    model_dimensions,
    rescaled_torch_operator,
)
from stratasim.workload_layer.traces.torch_pipeline import ASSUMPTIONS, converted_from_pytorch, gather_torch

__all__ = ["reshard_plan", "resharded"]

_SHARDED_MEMORY = ("weights", "gradients", "optimizer")


def reshard_plan(recorded: Plan, tp: int, pp: int, dp: int | None, source: str) -> Plan:
    """The plan with ``tp``, ``pp`` and ``dp`` (None: the recorded DP) for a trace recorded under ``recorded``.
    Raises :class:`WorkloadError` naming the option that cannot be had."""
    dp = recorded.dp if dp is None else dp
    return replace(target_plan(replace(recorded, tp=tp), tp * recorded.pp * dp, {"dp": dp}, source), pp=pp)


def _refuse_experts(recorded: Plan, options: dict[str, object], source: str) -> None:
    """Refuse to change anything of a trace recorded with expert parallelism, saying why: ``options`` are the
    options by name and value (None: not given), each naming the plan's field it changes, if any."""
    changed = " ".join(
        f"--{name} {value}"
        for name, value in options.items()
        if value is not None and value != getattr(recorded, name, None)
    )
    if recorded.ep > 1 and changed:
        raise WorkloadError(
            f"{changed}: the trace ({source}) was recorded with ep {recorded.ep}, whose TP, PP, DP and schedule are not "
            "re-sharded: a new TP changes the tokens each expert computes (sequence parallelism's gather over TP), and "
            "a new PP, DP or schedule re-carves the expert groups out of DP and divides gradients, optimizer steps and "
            "memory between dense and expert weights, which the trace does not record apart: re-shard its EP alone "
            "(--ep), or export the study again with the new plan"
        )


def _operators(file: Path) -> tuple[dict[int, compute_pb2.OperatorDesc], list[Node]]:
    """The operators the compute nodes of ``file`` were priced from, by node id, and the file's nodes."""
    _, nodes = read_trace(file)
    found = {}
    for node in nodes:
        for attr in node.attr:
            if attr.name == OP_ATTR:
                op = compute_pb2.OperatorDesc()
                try:
                    op.ParseFromString(attr.bytes_val)
                except Exception:  # noqa: BLE001 — protobuf raises DecodeError or RuntimeError by implementation
                    raise WorkloadError(f"{file}: node {node.id}: attribute {OP_ATTR} is not an operator") from None
                found[node.id] = op
    return found, nodes


@dataclass
class _Captured:
    """The nodes of ``file``, for those without an operator (a trace converted from PyTorch), whose operators
    :mod:`.torch_operators` reads; the model's dimensions read once, when first needed."""

    file: Path
    nodes: dict[int, Node]
    dimensions: ModelDimensions | None = None

    def operator(self, node_id: int, ratio: Fraction) -> compute_pb2.OperatorDesc | None:
        """Node ``node_id``'s operator at the new TP, None when kept as recorded (a CPU operator)."""
        node = self.nodes[node_id]
        try:
            if not has_tensors(node):
                raise WorkloadError(
                    f"node {node_id}: a compute node without the operator it was priced from (attribute {OP_ATTR}, "
                    "which stratasim trace export writes) or tensor shapes (inputs.shapes, which Chakra's PyTorch "
                    "converter writes), so its share of a new TP cannot be inferred"
                )
            if any(attr.name == "is_cpu_op" and attr.bool_val for attr in node.attr):
                return None
            self.dimensions = self.dimensions or model_dimensions(list(self.nodes.values()))
            return rescaled_torch_operator(node, ratio, self.dimensions)
        except WorkloadError as error:
            raise WorkloadError(f"{self.file}: {error}") from None


def _micro_batch(operators: dict[int, compute_pb2.OperatorDesc]) -> int:
    """Sequences per micro-batch: the QKV GEMM's tokens over attention's queries (1 when either is missing)."""
    tokens = queries = 0
    for op in operators.values():
        if op.name == "qkv" and op.WhichOneof("shape") == "gemm" and not tokens:
            tokens = op.gemm.m
        elif op.WhichOneof("shape") == "attention" and not queries:
            queries = op.attention.queries
        elif op.name == "attention scores" and op.WhichOneof("shape") == "gemm" and not queries:
            queries = op.gemm.m
    return tokens // queries if tokens and queries and tokens % queries == 0 else 1


def _sequence_parallel(graph: workload_pb2.ExecutionGraph, old: Plan) -> bool:
    """Whether ``graph``'s TP collectives are sequence parallelism's reduce-scatters and all-gathers."""
    tp_group, everyone = old.layout.group(graph.npu, "tp"), tuple(range(old.npus))
    return any(
        node.type == workload_pb2.COMM_COLL_NODE
        and (tuple(sorted(node.group)) or everyone) == tp_group
        and node.comm_type in (workload_pb2.REDUCE_SCATTER, workload_pb2.ALL_GATHER)
        for node in graph.nodes
    )


def _resharded_rank(
    graph: workload_pb2.ExecutionGraph, file: Path, old: Plan, new: Plan, recut: bool
) -> workload_pb2.ExecutionGraph:
    """``graph`` (recorded in ``file``) with its TP-dependent work scaled to ``new.tp``; re-sharded compute nodes
    carry their new operator and a duration of 0, to be priced; every compute node carries its operator when the
    pipeline is to be ``recut``."""
    copy = workload_pb2.ExecutionGraph()
    copy.CopyFrom(graph)
    if new.tp == old.tp and not recut:
        return copy
    ratio = Fraction(old.tp, new.tp)
    operators, nodes = _operators(file)
    captured = _Captured(file, {node.id: node for node in nodes})
    micro_batch, sequence = _micro_batch(operators), _sequence_parallel(copy, old)
    dp_group = old.layout.group(graph.npu, "dp")
    everyone = tuple(range(old.npus))
    for node in copy.nodes:
        where = f"{file}: node {node.id}"
        if node.type == workload_pb2.COMP_NODE and ratio == 1:
            if node.id in operators:
                node.op.CopyFrom(operators[node.id])
        elif node.type == workload_pb2.COMP_NODE:
            op = operators.get(node.id)
            new_op = captured.operator(node.id, ratio) if op is None else op
            if new_op is None:
                continue
            if op is not None:
                new_op = rescaled_operator(op, node.name, ratio, micro_batch, sequence, where)
            node.op.CopyFrom(new_op)
            node.duration_ps = 0
        elif node.type == workload_pb2.COMM_COLL_NODE and (tuple(sorted(node.group)) or everyone) == dp_group:
            node.comm_bytes = int(node.comm_bytes * ratio)
    for kind in _SHARDED_MEMORY:
        if kind in copy.resident_bytes:
            copy.resident_bytes[kind] = int(copy.resident_bytes[kind] * ratio)
    return copy


def resharded(
    source: str | Path,
    tp: int,
    pp: int,
    dp: int | None,
    *,
    max_npus: int,
    schedule: Schedule | None = None,
    ep: int | None = None,
) -> tuple[list[workload_pb2.ExecutionGraph], Plan, tuple[str, ...]]:
    """Every rank's graph of the trace ``<source>.<rank>.et`` re-sharded to ``tp`` x ``pp`` x ``dp`` (None: the
    recorded DP), the new plan, and what was assumed rather than inferred (for the user to read). Compute nodes
    whose work changed hold their operator and a duration of 0, to be priced; more than ``max_npus`` ranks (a file
    each) are refused. The pipeline is re-cut in ``schedule``'s order when it is given or PP changes (1F1B unless
    given), else its passes stay in the recorded order; a trace converted from PyTorch has its layers found by
    :mod:`.torch_pipeline`. A new ``ep`` (None: the recorded one) is re-sharded alone, by :mod:`.expert_reshard`."""
    graphs, old = read_planned(source)
    files = trace_files(source)
    if ep is not None and ep != old.ep:
        others = {"tp": tp, "pp": pp, "dp": dp, "schedule": schedule and schedule.name}
        operators = [_operators(file)[0] for file in files]
        out, new = reshard_experts(graphs, [str(file) for file in files], operators, old, ep, others)
        return out, new, ()
    _refuse_experts(old, {"tp": tp, "pp": pp, "dp": dp, "schedule": schedule and schedule.name}, str(files[0]))
    new = reshard_plan(old, tp, pp, dp, str(files[0]))
    if schedule is not None and schedule.chunks > 1 and schedule.name != "interleaved":
        raise WorkloadError(
            f"--virtual-stages {schedule.chunks}: only --schedule interleaved runs several model chunks per stage, "
            f"not {schedule.name}"
        )
    recutting = schedule is not None or new.pp != old.pp
    if new.npus > max_npus:
        raise WorkloadError(
            f"--tp {tp} --pp {pp} --dp {new.dp}: a re-sharded trace has a file per rank, {new.npus}, more than the "
            f"limit of {max_npus}; raise it with --max-npus {new.npus}"
        )
    middle = replace(new, pp=old.pp)  # TP and DP changed first, then the pipeline re-cut
    cache: dict[int, workload_pb2.ExecutionGraph] = {}
    out, sources = [], []
    for npu in range(middle.npus):
        ranks = {axis: middle.layout.rank(npu, axis) for axis in middle.order}
        recorded = old.layout.npu({**ranks, "tp": ranks["tp"] % old.tp, "dp": ranks["dp"] % old.dp})
        if recorded not in cache:
            cache[recorded] = _resharded_rank(graphs[recorded], files[recorded], old, new, recutting)
        out.append(regroup(cache[recorded], old, middle, npu, str(files[recorded])))
        sources.append(str(files[recorded]))
    if not recutting:
        return out, new, ()
    if not converted_from_pytorch(out[0]):
        return recut(out, middle, new, sources, schedule or Schedule()), new, ()
    if schedule is not None and schedule.name == "zb_h1":
        raise WorkloadError(
            f"--schedule zb_h1: the trace ({files[0]}) was converted from PyTorch, whose weight-gradient GEMMs are not "
            "told apart from the input-gradient ones (both aten::mm), so its backward passes cannot be split"
        )
    return recut(out, middle, new, sources, schedule or Schedule(), gather_torch), new, (ASSUMPTIONS,)
