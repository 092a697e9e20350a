"""Conversions between Chakra traces and StrataSim's own trace files, and a summary of either; an ASTRA-sim 1.0
text workload (:mod:`stratasim.workload_layer.traces.astra_text`) converts to either.

StrataSim's trace format: one file per rank, ``<prefix>.<rank>.pb``, each holding one length-delimited
``stratasim.v1.ExecutionGraph`` record (replayed as ``kind: stratasim_trace``). Converting back to Chakra
(:func:`from_graph`) is exact for everything Chakra can express and refuses, naming the node, what it cannot:
operator descriptors without a duration (price them first, as ``stratasim trace export`` does: the operator then
travels beside its duration as the ``stratasim.op`` attribute, which the reader skips) and, unless asked to keep them in
the ``duration_ps`` attribute, durations that are not whole microseconds. A wait node (``WAIT_NODE``, which Chakra
lacks) becomes a compute node of its duration marked by the ``wait`` attribute (the Chakra reader's docstring).

Communicator groups travel as in ASTRA-sim: each collective carries its ``pg_name`` and the groups go to the
communicator groups file ``<target>.json`` beside the traces (written when some collective has a name), which
the Chakra reader picks up. A collective over a group without a name gets the smallest positive integer not
otherwise used as a name (ASTRA-sim accepts only integer names), one per distinct group in order of first
appearance, rank by rank. One name standing for different groups on different ranks is refused: the file gives
each name one group. Chakra -> IR -> Chakra keeps names; IR -> Chakra -> IR is exact, except that unnamed groups
come back with their generated names and a group of every NPU comes back empty (both mean the same).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Literal

from google.protobuf.message import DecodeError

from stratasim.chakra import et_def_pb2
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.graph_blocks import unrolled
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.astra_text import build_graph, read_astra_text
from stratasim.workload_layer.traces.chakra import (
    DURATION_ATTR,
    MEMORY_ATTR,
    MILESTONE_ATTR,
    OP_ATTR,
    RESIDENT_ATTR,
    ROOT_ATTR,
    US_TO_PS,
    WAIT_ATTR,
    read_chakra_graphs,
    read_records,
    read_trace,
    to_graph,
    trace_files,
    write_records,
    write_trace,
)
from stratasim.workload_layer.traces.comm_groups import write_comm_groups

__all__ = [
    "TraceSummary",
    "from_graph",
    "name_groups",
    "read_graphs",
    "write_graphs",
    "write_chakra",
    "chakra_to_stratasim",
    "stratasim_to_chakra",
    "astra_text_to",
    "convert",
    "summarize",
]

CHAKRA_VERSION = "0.0.4"
"""The ``GlobalMetadata.version`` written into converted Chakra traces (that of ASTRA-sim's examples)."""


def _int_attr(name: str, value: int) -> et_def_pb2.AttributeProto:
    return et_def_pb2.AttributeProto(name=name, int64_val=value)


_COMM_NODES = (workload_pb2.COMM_COLL_NODE, workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE)


def from_graph(
    graph: workload_pb2.ExecutionGraph, source: str = "", *, exact_durations: bool = False
) -> list[et_def_pb2.Node]:
    """The Chakra nodes of ``graph``, the inverse of :func:`~stratasim.workload_layer.traces.chakra.to_graph`.

    A collective's group is written as its ``pg_name`` only: the groups themselves belong in the communicator
    groups file (see :func:`name_groups`), so a group without a name is refused here. A duration that is not a
    whole number of microseconds is refused unless ``exact_durations``: then ``duration_micros`` holds it
    rounded and the ``duration_ps`` attribute exactly (what StrataSim reads back).
    """
    nodes = []
    for node in graph.nodes:
        where = f"{source or f'NPU {graph.npu}'}: node {node.id}"
        priced = node.HasField("op") and node.duration_ps > 0
        lost = ["op"] if node.HasField("op") and not priced else []
        if node.group and not (node.type == workload_pb2.COMM_COLL_NODE and node.pg_name):
            lost.append("group without a pg_name")
        if node.pg_name and node.type not in _COMM_NODES:
            lost.append("pg_name outside communication nodes")
        if node.duration_ps and node.type in (workload_pb2.MEM_LOAD_NODE, workload_pb2.MEM_STORE_NODE):
            lost.append("a memory node's duration_ps")
        if lost:
            raise WorkloadError(f"{where}: Chakra traces cannot express {', '.join(lost)}")
        wait = node.type == workload_pb2.WAIT_NODE
        out = et_def_pb2.Node(
            id=node.id,
            name=node.name,
            type=et_def_pb2.COMP_NODE if wait else et_def_pb2.NodeType.ValueType(node.type),
            ctrl_deps=node.ctrl_deps,
            data_deps=node.data_deps,
        )
        if node.type == workload_pb2.COMP_NODE or wait:
            _duration(node, out, where, exact_durations)
            if priced:
                out.attr.append(et_def_pb2.AttributeProto(name=OP_ATTR, bytes_val=node.op.SerializeToString()))
            if wait:
                out.attr.append(et_def_pb2.AttributeProto(name=WAIT_ATTR, bool_val=True))
        elif node.type == workload_pb2.COMM_COLL_NODE:
            out.attr.extend([_int_attr("comm_type", node.comm_type), _int_attr("comm_size", node.comm_bytes)])
            if node.HasField("root"):
                out.attr.append(_int_attr(ROOT_ATTR, node.root))
        elif node.type in (workload_pb2.COMM_SEND_NODE, workload_pb2.COMM_RECV_NODE):
            peer = "comm_dst" if node.type == workload_pb2.COMM_SEND_NODE else "comm_src"
            out.attr.extend(
                [_int_attr(peer, node.peer), _int_attr("comm_tag", node.tag), _int_attr("comm_size", node.comm_bytes)]
            )
        elif node.type in (workload_pb2.MEM_LOAD_NODE, workload_pb2.MEM_STORE_NODE):
            out.attr.append(_int_attr("tensor_size", node.comm_bytes))
        if node.pg_name:
            out.attr.append(et_def_pb2.AttributeProto(name="pg_name", string_val=node.pg_name))
        if node.memory_bytes:
            out.attr.append(et_def_pb2.AttributeProto(name=MEMORY_ATTR, sint64_val=node.memory_bytes))
        if node.milestone:
            out.attr.append(et_def_pb2.AttributeProto(name=MILESTONE_ATTR, bool_val=True))
        nodes.append(out)
    return nodes


def _duration(node: workload_pb2.Node, out: et_def_pb2.Node, where: str, exact_durations: bool) -> None:
    """A compute or wait node's duration on Chakra's node ``out``: whole microseconds, and with ``exact_durations``
    the exact picoseconds in the ``duration_ps`` attribute when they are not."""
    micros, rest = divmod(node.duration_ps, US_TO_PS)
    if micros < 0 or (rest and not exact_durations):
        raise WorkloadError(f"{where}: duration {node.duration_ps} ps is not a whole number of microseconds")
    out.duration_micros = micros + (2 * rest >= US_TO_PS)
    if rest:
        out.attr.append(_int_attr(DURATION_ATTR, node.duration_ps))


def _metadata(
    graph: workload_pb2.ExecutionGraph, extra: Sequence[et_def_pb2.AttributeProto]
) -> et_def_pb2.GlobalMetadata:
    """The metadata record of a converted trace: the version, the graph's resident memory by kind and ``extra``."""
    resident = [
        et_def_pb2.AttributeProto(name=RESIDENT_ATTR + kind, uint64_val=size)
        for kind, size in sorted(graph.resident_bytes.items())
    ]
    return et_def_pb2.GlobalMetadata(version=CHAKRA_VERSION, attr=[*resident, *extra])


def name_groups(
    graphs: Sequence[workload_pb2.ExecutionGraph], sources: Sequence[str]
) -> tuple[list[workload_pb2.ExecutionGraph], dict[str, list[int]]]:
    """Copies of ``graphs`` (index = NPU) in which every collective over a group has a ``pg_name``, and the
    groups by name, for the communicator groups file.

    A group of every NPU is left empty and, unnamed, stays unnamed; other unnamed groups get the smallest positive
    integers no node uses as a name. Raises :class:`WorkloadError` if a name stands for two groups, naming both
    places (``sources[npu]`` names the input of NPU ``npu``).
    """
    everyone = tuple(range(len(graphs)))
    taken = {node.pg_name for graph in graphs for node in graph.nodes}
    unused = (str(number) for number in count(1) if str(number) not in taken)
    generated: dict[tuple[int, ...], str] = {}
    groups: dict[str, tuple[tuple[int, ...], str]] = {}
    named = []
    for graph, source in zip(graphs, sources, strict=True):
        copy = workload_pb2.ExecutionGraph()
        copy.CopyFrom(graph)
        for node in copy.nodes:
            if node.type != workload_pb2.COMM_COLL_NODE:
                continue
            members = tuple(sorted(set(node.group))) or everyone
            if members == everyone:
                del node.group[:]
            if not node.pg_name and node.group:
                if members not in generated:
                    generated[members] = next(unused)
                node.pg_name = generated[members]
            if not node.pg_name:
                continue
            where = f"{source}: node {node.id}"
            first, first_where = groups.setdefault(node.pg_name, (members, where))
            if first != members:
                raise WorkloadError(
                    f"{where}: pg_name {node.pg_name!r} is the group {list(members)} here but {list(first)} at "
                    f"{first_where}; a communicator groups file gives each name one group"
                )
        named.append(copy)
    return named, {name: list(members) for name, (members, _) in groups.items()}


def read_graphs(prefix: str | Path) -> list[workload_pb2.ExecutionGraph]:
    """The graphs of StrataSim trace files ``<prefix>.<rank>.pb``, index = rank."""
    graphs = []
    for rank, path in enumerate(trace_files(prefix, ".pb")):
        records = read_records(path)
        if len(records) != 1:
            raise WorkloadError(f"{path}: expected one ExecutionGraph record, found {len(records)}")
        try:
            graph = workload_pb2.ExecutionGraph.FromString(records[0][1])
        except DecodeError:
            raise WorkloadError(f"{path}: the record at byte 0 is not an ExecutionGraph message") from None
        if graph.npu != rank:
            raise WorkloadError(f"{path}: the graph is for NPU {graph.npu}, not {rank}")
        graphs.append(graph)
    return graphs


def write_graphs(prefix: str | Path, graphs: Sequence[workload_pb2.ExecutionGraph]) -> list[Path]:
    """Write one ``<prefix>.<rank>.pb`` per graph; return the files written."""
    paths = [Path(f"{prefix}.{rank}.pb") for rank in range(len(graphs))]
    for path, graph in zip(paths, graphs):
        write_records(path, [graph])
    return paths


def chakra_to_stratasim(source: str | Path, target: str | Path) -> list[Path]:
    """Convert the Chakra trace ``<source>.<rank>.et``, its groups from ``<source>.json`` if that exists, to
    ``<target>.<rank>.pb``; return the files written."""
    return write_graphs(target, read_chakra_graphs(source))


def stratasim_to_chakra(source: str | Path, target: str | Path) -> list[Path]:
    """Convert StrataSim trace files ``<source>.<rank>.pb`` to ``<target>.<rank>.et`` (blocks unrolled: Chakra has
    none); return the files written."""
    graphs = read_graphs(source)
    for rank, graph in enumerate(graphs):
        try:
            graphs[rank] = unrolled(graph)
        except WorkloadError as exc:
            raise WorkloadError(f"{source}.{rank}.pb: {exc}") from None
    return write_chakra(target, graphs, [f"{source}.{rank}.pb" for rank in range(len(graphs))])


def write_chakra(
    target: str | Path,
    graphs: Sequence[workload_pb2.ExecutionGraph],
    sources: Sequence[str],
    *,
    exact_durations: bool = False,
    metadata: Sequence[et_def_pb2.AttributeProto] = (),
) -> list[Path]:
    """Write ``<target>.<rank>.et`` per graph (without blocks), and ``<target>.json`` if collectives name
    communicator groups; ``sources[rank]`` names the input of that rank in errors; ``exact_durations`` as
    :func:`from_graph` takes it; ``metadata`` are attributes for every rank's metadata record (the plan)."""
    named, groups = name_groups(graphs, sources)
    traces = [
        (Path(f"{target}.{rank}.et"), graph, from_graph(graph, source, exact_durations=exact_durations))
        for rank, (graph, source) in enumerate(zip(named, sources, strict=True))
    ]
    for path, graph, nodes in traces:
        write_trace(path, _metadata(graph, metadata), nodes)
    written = [path for path, _, _ in traces]
    if groups:
        written.append(Path(f"{target}.json"))
        write_comm_groups(written[-1], groups)
    return written


def astra_text_to(
    source: str | Path, target: str | Path, to: Literal["chakra", "stratasim"], npus: int, passes: int = 1
) -> list[Path]:
    """Convert the ASTRA-sim text workload file ``source``, for ``npus`` NPUs and ``passes`` iterations, to a
    Chakra (``<target>.<rank>.et``) or StrataSim (``<target>.<rank>.pb``) trace; return the files written. The
    Chakra output equals what ``chakra_converter Text`` writes, but with node ids counted from 0 on every rank."""
    if npus < 1 or passes < 1:
        raise WorkloadError(f"{source}: npus and passes must be at least 1, got {npus} and {passes}")
    model = read_astra_text(source)
    graphs = [build_graph(model, npu, passes) for npu in range(npus)]
    if to == "stratasim":
        return write_graphs(target, graphs)
    return write_chakra(target, graphs, [f"{source} (NPU {npu})" for npu in range(npus)])


@dataclass
class TraceSummary:
    """What a trace holds, summed over its ranks; ``compute_ps`` is the total duration of compute nodes."""

    ranks: int = 0
    nodes: Counter[str] = field(default_factory=Counter)
    collectives: Counter[str] = field(default_factory=Counter)
    collective_bytes: Counter[str] = field(default_factory=Counter)
    p2p_bytes: int = 0
    compute_ps: int = 0

    def add(self, graph: workload_pb2.ExecutionGraph) -> None:
        """Count the nodes one more rank runs (a block's once per block node running it)."""
        self.ranks += 1
        for node in unrolled(graph).nodes:
            self.nodes[workload_pb2.NodeType.Name(node.type)] += 1
            if node.type == workload_pb2.COMP_NODE:
                self.compute_ps += node.duration_ps
            elif node.type == workload_pb2.COMM_COLL_NODE:
                name = workload_pb2.CollectiveType.Name(node.comm_type)
                self.collectives[name] += 1
                self.collective_bytes[name] += node.comm_bytes
            elif node.type == workload_pb2.COMM_SEND_NODE:
                self.p2p_bytes += node.comm_bytes

    def to_text(self) -> str:
        """A few human-readable lines."""
        lines = [f"ranks: {self.ranks}", f"nodes: {sum(self.nodes.values())}"]
        lines += [f"  {name}: {count}" for name, count in sorted(self.nodes.items())]
        lines.append(f"collectives: {sum(self.collectives.values())}, {sum(self.collective_bytes.values())} bytes")
        lines += [
            f"  {name}: {count}, {self.collective_bytes[name]} bytes"
            for name, count in sorted(self.collectives.items())
        ]
        lines.append(f"point-to-point sends: {self.p2p_bytes} bytes")
        lines.append(f"compute: {self.compute_ps / 1e6:g} us")
        return "\n".join(lines)


def summarize(file_or_prefix: str | Path) -> TraceSummary:
    """The summary of one Chakra ``.et`` file (its peers and communicators unchecked), or of every rank of a
    Chakra (``.et``) or StrataSim (``.pb``) trace prefix (Chakra is tried first)."""
    summary = TraceSummary()
    path = Path(file_or_prefix)
    if path.is_file():
        summary.add(to_graph(read_trace(path)[1], 0, None, str(path)))
        return summary
    try:
        trace_files(path)
    except WorkloadError:
        try:
            graphs = read_graphs(path)
        except WorkloadError:
            raise WorkloadError(f"no Chakra (.et) or StrataSim (.pb) traces match {file_or_prefix}.<rank>") from None
    else:
        graphs = read_chakra_graphs(path)
    for graph in graphs:
        summary.add(graph)
    return summary


def convert(
    source: str | Path,
    target: str | Path,
    to: Literal["chakra", "stratasim"],
    *,
    npus: int | None = None,
    passes: int = 1,
) -> list[Path]:
    """``stratasim trace convert``: ``source`` is an ASTRA-sim text workload if it is a file (then ``npus`` is
    required), otherwise a trace prefix in the format other than ``to``; return the files written."""
    if Path(source).is_file():
        if npus is None:
            raise WorkloadError(f"{source}: converting an ASTRA-sim text workload needs the number of NPUs (--npus)")
        return astra_text_to(source, target, to, npus, passes)
    return stratasim_to_chakra(source, target) if to == "chakra" else chakra_to_stratasim(source, target)
