"""``stratasim trace export``: any study's workload written as a trace, one file per NPU, that replays to the
same time.

Whole-model workloads let the engine simulate one representative NPU per class of symmetric NPUs; an export
writes every NPU's own graph, so it is refused beyond ``max_npus`` NPUs (a 1024-NPU GPT-3 would fill a disk).

- ``stratasim``: ``<out>.<npu>.pb`` (``kind: stratasim_trace``) keeps the graphs as built: blocks, operators
  (priced when replayed, by the replaying study's compute backend), groups and roots.
- ``chakra``: ``<out>.<npu>.et`` (``kind: chakra``; ASTRA-sim and Chakra's tools) has neither blocks nor
  operators, so blocks are unrolled and every operator is priced now, by the study's compute backend, into its
  node's duration (the operator kept beside it as the ``stratasim.op`` attribute, which ``stratasim trace reshard``
  splits or merges): exact picoseconds in the ``duration_ps`` attribute StrataSim reads, whole microseconds in
  ``duration_micros`` for other readers. Communicator groups go to ``<out>.json``; a name standing for several
  groups (each tensor-parallel group is ``tp``) gives way to ASTRA-sim's integer names, one per group. A
  transformer's plan goes into every rank's metadata (``stratasim.parallelism.*``), so that ``stratasim trace
  rescale`` can tell its groups apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

from stratasim.chakra.et_def_pb2 import AttributeProto
from stratasim.config.study_file import Study
from stratasim.kernel.errors import StrataSimError, WorkloadError
from stratasim.kernel.graph_blocks import every_node, unpriced, unrolled
from stratasim.kernel.serving import RequestLevelWorkload
from stratasim.study.balance import balance_in_process
from stratasim.study.budget import DEFAULT_BUDGET, NODE_BYTES, Budget, check_budget, refuse_over
from stratasim.study.compute_setup import open_pricer
from stratasim.study.limits import DEFAULT_MAX_NPUS
from stratasim.study.run import prepare_workload
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.convert import write_chakra, write_graphs
from stratasim.workload_layer.traces.rescale import Plan, plan_attributes
from stratasim.workload_layer.transformer.config import TransformerConfig

__all__ = ["export_trace"]


def export_trace(
    study: Study,
    target: str | Path,
    to: Literal["chakra", "stratasim"],
    *,
    max_npus: int = DEFAULT_MAX_NPUS,
    budget: Budget = DEFAULT_BUDGET,
) -> list[Path]:
    """Write the graph of every NPU of ``study``'s workload as ``<target>.<npu>.pb`` or ``.et`` (and the
    communicator groups file of a Chakra trace); return the files written. Raises :class:`StrataSimError`
    when the workload runs on more than ``max_npus`` NPUs, or would hold more than ``budget`` allows: every
    NPU's graph is built, not only those a run simulates."""
    source, npus = prepare_workload(study)
    if isinstance(source, RequestLevelWorkload):
        raise WorkloadError(
            f"workload: kind {study.workload.kind} runs requests at the request level and has no execution graphs "
            "to export or replay"
        )
    if npus > max_npus:
        raise StrataSimError(
            f"{study.name}: the workload runs on {npus} NPUs and an export writes one file per NPU, more than the "
            f"limit of {max_npus}; raise it with --max-npus {npus} to export them all"
        )
    source = balance_in_process(source, npus, study, contact_remote=True)
    estimate = check_budget(study, source, npus, budget)
    every = npus * estimate.work.nodes
    refuse_over(
        f"{study.source}: exporting {npus:,} NPUs' graphs ({every:.3g} nodes)",
        every * NODE_BYTES,
        every,
        budget,
        estimate.work.drivers,
    )
    built = source.graphs(npus)
    graphs = [_numbered(built[npu], npu) for npu in range(npus)]
    if to == "stratasim":
        return write_graphs(target, graphs)
    plain = [unrolled(graph) for graph in _priced(graphs, study)]
    return write_chakra(
        target,
        _distinct_names(plain),
        [f"NPU {npu}" for npu in range(npus)],
        exact_durations=True,
        metadata=_plan(study),
    )


def _plan(study: Study) -> list[AttributeProto]:
    """The metadata attributes recording a transformer study's parallel plan (none for other workloads)."""
    config = study.workload.config
    if not isinstance(config, TransformerConfig):
        return []
    plan = config.parallelism
    return plan_attributes(Plan(plan.tp, plan.pp, plan.dp, plan.ep, plan.zero, plan.order))


def _numbered(graph: workload_pb2.ExecutionGraph, npu: int) -> workload_pb2.ExecutionGraph:
    """``graph`` as NPU ``npu``'s own (workloads share one graph object between NPUs running the same)."""
    if graph.npu == npu:
        return graph
    copy = workload_pb2.ExecutionGraph()
    copy.CopyFrom(graph)
    copy.npu = npu
    return copy


def _priced(graphs: Sequence[workload_pb2.ExecutionGraph], study: Study) -> list[workload_pb2.ExecutionGraph]:
    """Copies of ``graphs`` whose operator nodes (blocks' included) have fixed durations (the operators kept beside
    them, for ``stratasim trace reshard``), each distinct operator priced once, in one request, on the study's device and calibration as the engine prices them."""
    copies = []
    for graph in graphs:
        copy = workload_pb2.ExecutionGraph()
        copy.CopyFrom(graph)
        copies.append(copy)
    operators = [node for graph in copies for node in every_node(graph) if node.HasField("op")]
    if not operators:
        return copies
    section = study.compute
    if section is None:
        raise unpriced(operators[0], any(graph.foreign_names for graph in copies))
    with ExitStack() as stack:
        pricer = open_pricer(section, stack)
        durations = pricer.durations_ps([node.op for node in operators])
    for node, duration in zip(operators, durations, strict=True):
        node.duration_ps = duration
    return copies


def _distinct_names(graphs: list[workload_pb2.ExecutionGraph]) -> list[workload_pb2.ExecutionGraph]:
    """``graphs`` with the ``pg_name`` of collectives cleared where one name stands for several groups, so that
    each group gets a name of its own in the communicator groups file (the graphs are changed in place)."""
    everyone = tuple(range(len(graphs)))
    seen: dict[str, set[tuple[int, ...]]] = {}
    collectives = [node for graph in graphs for node in graph.nodes if node.type == workload_pb2.COMM_COLL_NODE]
    for node in collectives:
        if node.pg_name:
            seen.setdefault(node.pg_name, set()).add(tuple(sorted(set(node.group))) or everyone)
    shared = {name for name, groups in seen.items() if len(groups) > 1}
    for node in collectives:
        if node.pg_name in shared:
            node.pg_name = ""
    return graphs
