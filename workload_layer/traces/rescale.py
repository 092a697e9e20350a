"""``stratasim trace rescale``: a Chakra trace set recorded at N ranks turned into one for M ranks by changing
its data-parallel degree.

What a trace says of its plan: ``stratasim trace export`` of a transformer study writes the plan into every
rank's ``GlobalMetadata`` as ``stratasim.parallelism.<axis>`` attributes (``tp``, ``pp``, ``dp``, ``ep``,
``zero``, and ``order``, the axes innermost first, as ``workload.parallelism.order``), from which each rank's
place in every group follows (:class:`~stratasim.workload_layer.transformer.rank_layout.RankLayout`). A trace
without them is read as pure data parallelism when it is one (every collective an all-reduce over every NPU, no
point-to-point transfer: what the training loop, MLP and ResNet-50 export), and refused otherwise.

What is scaled: DP is replicated. New rank ``r'`` runs the graph of the recorded rank with the same TP and PP
ranks (and the DP rank ``r' mod dp``): its compute durations and every size stay as recorded — a DP replica's work
does not depend on how many replicas there are, and the gradient all-reduce carries the whole gradient buffer
(each NPU's, as StrataSim's collectives count size) at any DP degree. Each collective's group becomes the same
axis's group of ``r'`` under the new plan, each transfer's peer the rank with the peer's TP and PP ranks in
``r'``'s replica. A global batch grows with DP (weak scaling): the micro-batches per replica are kept.

What cannot be scaled: TP and PP. A trace's operators are priced durations, not shapes (a TP shard's GEMM
does not take ``tp/tp'`` of the time: tile and wave quantisation and the efficiency model bend it), and a new
PP degree moves layers between stages and reorders the pipeline schedule; both are refused with a message
saying to export the study again with the new plan. ZeRO (which shards resident memory over DP) and expert
parallelism (groups carved out of DP) are refused too for a change of DP, and so is growing a trace recorded
with one replica: it has no gradient all-reduce to replicate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stratasim.chakra.et_def_pb2 import AttributeProto, GlobalMetadata
from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.chakra import read_trace, to_graph, trace_files
from stratasim.workload_layer.traces.comm_groups import read_comm_groups
from stratasim.workload_layer.traces.convert import write_chakra
from stratasim.workload_layer.transformer.rank_layout import RankLayout

__all__ = ["PLAN_ATTR", "Plan", "plan_attributes", "read_planned", "refuse_stale", "target_plan", "regroup", "rescale"]

PLAN_ATTR = "stratasim.parallelism."
"""The prefix of the metadata attributes holding the plan a trace was recorded with."""

_DEGREES = ("tp", "pp", "dp", "ep", "zero")


@dataclass(frozen=True)
class Plan:
    """A parallel plan as a trace records it: the degrees, the ZeRO stage and the axes innermost first."""

    tp: int
    pp: int
    dp: int
    ep: int = 1
    zero: int = 0
    order: tuple[str, ...] = ("tp", "pp", "dp")

    @property
    def layout(self) -> RankLayout:
        """Where each axis's rank sits in an NPU id."""
        return RankLayout(self.order, {"tp": self.tp, "pp": self.pp, "dp": self.dp})

    @property
    def npus(self) -> int:
        """The ranks the plan fills."""
        return self.tp * self.pp * self.dp


def plan_attributes(plan: Plan) -> list[AttributeProto]:
    """The metadata attributes recording ``plan`` (what :func:`rescale` reads back)."""
    attrs = [AttributeProto(name=PLAN_ATTR + axis, int64_val=getattr(plan, axis)) for axis in _DEGREES]
    return [*attrs, AttributeProto(name=PLAN_ATTR + "order", string_val=",".join(plan.order))]


def _recorded_plan(metadata: GlobalMetadata, source: str) -> Plan | None:
    """The plan in ``metadata``, None when it records none."""
    found = {attr.name.removeprefix(PLAN_ATTR): attr for attr in metadata.attr if attr.name.startswith(PLAN_ATTR)}
    if not found:
        return None
    degrees: dict[str, int] = {}
    for axis in _DEGREES:
        attr = found.get(axis)
        if attr is None or attr.WhichOneof("value") != "int64_val" or attr.int64_val < (0 if axis == "zero" else 1):
            raise WorkloadError(
                f"{source}: metadata attribute {PLAN_ATTR}{axis} must be an int64 "
                f"{'from 0' if axis == 'zero' else 'of at least 1'}"
            )
        degrees[axis] = attr.int64_val
    order = tuple(found["order"].string_val.split(",")) if "order" in found else ()
    if sorted(order) != ["dp", "pp", "tp"]:
        raise WorkloadError(f"{source}: metadata attribute {PLAN_ATTR}order must list tp, pp and dp once each")
    return Plan(**degrees, order=order)


def _not_data_parallel(graphs: Sequence[workload_pb2.ExecutionGraph], files: Sequence[Path]) -> str:
    """Where ``graphs`` are not purely data-parallel ("" if they are): a point-to-point transfer, or a collective
    other than an all-reduce over every NPU (an all-to-all, say, exchanges model shards whose sizes depend on N)."""
    for graph, file in zip(graphs, files, strict=True):
        for node in graph.nodes:
            if node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE) or (
                node.type == workload_pb2.COMM_COLL_NODE and (node.group or node.comm_type != workload_pb2.ALL_REDUCE)
            ):
                return f"{file}: node {node.id}"
    return ""


def read_planned(prefix: str | Path) -> tuple[list[workload_pb2.ExecutionGraph], Plan]:
    """The graphs of ``<prefix>.<rank>.et`` and the plan they were recorded with."""
    files = trace_files(prefix)
    beside = Path(f"{prefix}.json")
    groups = read_comm_groups(beside) if beside.is_file() else None
    graphs, plans = [], []
    for rank, file in enumerate(files):
        metadata, nodes = read_trace(file)
        graphs.append(to_graph(nodes, rank, len(files), str(file), groups=groups, metadata=metadata))
        plans.append(_recorded_plan(metadata, str(file)))
    if all(plan is None for plan in plans):
        where = _not_data_parallel(graphs, files)
        if where:
            raise WorkloadError(
                f"{where}: the trace records no parallel plan (metadata attributes {PLAN_ATTR}tp, pp, dp, ...: "
                "stratasim trace export of a transformer study writes them), so it is rescaled only when purely "
                "data-parallel — all-reduces over every NPU, nothing sent point to point — and this node is not"
            )
        return graphs, Plan(tp=1, pp=1, dp=len(files))
    plan = plans[0]
    for file, other in zip(files, plans, strict=True):
        if other != plan:
            raise WorkloadError(f"{file}: its plan ({PLAN_ATTR}*) differs from that of {files[0]}")
    assert plan is not None
    if plan.npus != len(files):
        raise WorkloadError(
            f"{prefix}: the plan recorded (tp {plan.tp} x pp {plan.pp} x dp {plan.dp} = {plan.npus} "
            f"ranks) does not match the {len(files)} trace files"
        )
    return graphs, plan


def target_plan(recorded: Plan, npus: int, degrees: Mapping[str, int | None], source: str) -> Plan:
    """The plan for ``npus`` ranks: ``recorded`` with DP changed to fill them; ``degrees`` are the ``--tp``,
    ``--pp`` and ``--dp`` options given (None when not). Raises :class:`WorkloadError` naming the option."""
    for axis in ("tp", "pp"):
        wanted = degrees.get(axis)
        if wanted is not None and wanted != getattr(recorded, axis):
            raise WorkloadError(
                f"--{axis} {wanted}: the trace ({source}) was recorded with {axis} {getattr(recorded, axis)}; rescale "
                f"changes DP only: re-shard {axis.upper()} with stratasim trace reshard"
            )
    replica = recorded.tp * recorded.pp
    if npus < 1 or npus % replica:
        raise WorkloadError(
            f"--npus {npus}: the trace's plan ({source}) has tp {recorded.tp} x pp {recorded.pp} = {replica} ranks per "
            f"data-parallel replica, so the rank count must be a positive multiple of {replica}"
        )
    dp = npus // replica
    if degrees.get("dp") is not None and degrees["dp"] != dp:
        raise WorkloadError(
            f"--dp {degrees['dp']}: with tp {recorded.tp} and pp {recorded.pp}, --npus {npus} makes dp {dp}"
        )
    if recorded.dp == 1 and dp > 1:
        raise WorkloadError(
            f"--npus {npus}: the trace ({source}) was recorded with dp 1, so it holds no gradient "
            "all-reduce to replicate; record it with at least 2 data-parallel replicas"
        )
    if dp != recorded.dp and (recorded.zero or recorded.ep > 1):
        what = f"ZeRO stage {recorded.zero} shards memory" if recorded.zero else f"ep {recorded.ep} carves groups"
        raise WorkloadError(
            f"--npus {npus}: the trace ({source}) was recorded with {what} over DP, which a change "
            f"of DP cannot rescale: export the study again with parallelism.dp: {dp}"
        )
    return Plan(recorded.tp, recorded.pp, dp, recorded.ep, recorded.zero, recorded.order)


def _axis(old: RankLayout, npus: int, rank: int, group: Sequence[int], where: str) -> str:
    """The axis whose group of ``rank`` is ``group`` (empty: every NPU)."""
    members = tuple(sorted(group)) or tuple(range(npus))
    for axis in old.order:
        if old.group(rank, axis) == members:
            return axis
    raise WorkloadError(f"{where}: its group {list(members)} is not a tp, pp or dp group of the recorded plan")


def regroup(
    graph: workload_pb2.ExecutionGraph, old: Plan, new: Plan, npu: int, source: str
) -> workload_pb2.ExecutionGraph:
    """NPU ``npu``'s graph under ``new``, from ``graph``, that of the recorded rank it replicates: each collective
    over the same axis's group of ``npu``, each transfer to the peer holding the same pipeline stage in ``npu``'s
    tensor-parallel rank and replica (a transfer across TP ranks or replicas is refused)."""
    copy = workload_pb2.ExecutionGraph()
    copy.CopyFrom(graph)
    copy.npu = npu
    everyone = tuple(range(new.npus))
    for node in copy.nodes:
        where = f"{source}: node {node.id}"
        if node.type == workload_pb2.COMM_COLL_NODE:
            members = new.layout.group(npu, _axis(old.layout, old.npus, graph.npu, node.group, where))
            node.ClearField("group")
            node.group.extend(() if members == everyone else members)
            node.pg_name = ""  # named again, one name per group, when written
            if node.HasField("root"):
                raise WorkloadError(f"{where}: a rooted collective (broadcast or reduce) cannot be rescaled")
        elif node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            ranks = {axis: old.layout.rank(node.peer, axis) for axis in old.order}
            for axis, across in (("dp", "data-parallel replicas"), ("tp", "tensor-parallel ranks")):
                if ranks[axis] != old.layout.rank(graph.npu, axis):
                    raise WorkloadError(f"{where}: it sends across {across}, which cannot be rescaled")
            node.peer = new.layout.npu({**ranks, "tp": new.layout.rank(npu, "tp"), "dp": new.layout.rank(npu, "dp")})
    return copy


def refuse_stale(target: str | Path, npus: int) -> None:
    """Refuse to write ``npus`` ranks at ``target`` when a rank file beyond them is there: a replay would read it
    as one more rank."""
    stale = Path(f"{target}.{npus}.et")
    if stale.exists():
        raise WorkloadError(
            f"{stale} exists: the rescaled trace has ranks 0..{npus - 1}, and a replay would read it "
            "as one more; remove the old trace or write elsewhere"
        )


def rescale(
    source: str | Path, target: str | Path, npus: int, degrees: Mapping[str, int | None], *, max_npus: int
) -> list[Path]:
    """Write the Chakra trace ``<source>.<rank>.et`` rescaled to ``npus`` ranks as ``<target>.<rank>.et`` (and
    its communicator groups file); return the files written. ``degrees`` as :func:`target_plan` takes them; more
    than ``max_npus`` ranks (a file each) are refused, as is a target holding a rank file beyond the new ranks,
    which a replay would read as one of them."""
    if npus > max_npus:
        raise WorkloadError(
            f"--npus {npus}: a rescaled trace has a file per rank, more than the limit of {max_npus}; "
            f"raise it with --max-npus {npus}"
        )
    refuse_stale(target, npus)
    graphs, old = read_planned(source)
    first = f"{source}.0.et"
    new = target_plan(old, npus, degrees, first)
    rescaled, sources = [], []
    for npu in range(new.npus):
        ranks = {axis: new.layout.rank(npu, axis) for axis in new.order}
        recorded = old.layout.npu({**ranks, "dp": ranks["dp"] % old.dp})
        rescaled.append(regroup(graphs[recorded], old, new, npu, f"{source}.{recorded}.et"))
        sources.append(f"rank {npu} (from {source}.{recorded}.et)")
    return write_chakra(target, rescaled, sources, exact_durations=True, metadata=plan_attributes(new))
