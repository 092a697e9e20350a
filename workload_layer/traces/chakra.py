"""Chakra execution traces (ASTRA-sim 2.0's workload format): read and write ``.et`` files, map them onto the
StrataSim workload IR, and run them as ``workload: {kind: chakra, path: <prefix>}``.

A trace is one file per rank, ``<prefix>.<rank>.et``, for ranks 0..N-1 (found by :mod:`.rank_files`). Each file is
a stream of length-delimited protobuf records (a varint32 length, then the message): one :class:`GlobalMetadata`,
then :class:`Node` records (schema: ``proto/stratasim/chakra/et_def.proto``; read and written by
:mod:`.et_records`, whose functions this module re-exports). Every defect of a file is a
:class:`~stratasim.kernel.errors.WorkloadError` naming the file.

The mapping (:func:`to_graph`) keeps ids, names, types and dependencies, and reads node attributes the way
ASTRA-sim does:

- ``COMP_NODE``: ``duration_micros`` (microseconds) becomes ``duration_ps``. CPU operators (``is_cpu_op``) stay
  compute nodes; ``num_ops`` and ``tensor_size`` are not priced.
- ``COMM_COLL_NODE``: ``comm_type`` (a ``CollectiveCommType``, same numbering as our ``CollectiveType``) and
  ``comm_size`` in bytes, both required. ``pg_name`` (a string) names the communicator: it is kept as the IR's
  ``pg_name`` and its NPUs become ``group`` (below). Without one the collective runs over every NPU.
  ``involved_dim`` is ignored.
- ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: ``comm_dst`` / ``comm_src`` is the peer (a global rank), ``comm_tag``
  the tag, ``comm_size`` the bytes and ``pg_name``, if any, is kept.
- ``MEM_LOAD_NODE`` / ``MEM_STORE_NODE``: ``tensor_size``, when present, becomes ``comm_bytes``.

Communicator groups (:mod:`stratasim.workload_layer.traces.comm_groups`). Chakra nodes carry only the name; the NPUs of each name come from, first, the trace's own
``process_group:init`` METADATA nodes (what Chakra's PyTorch converter writes: PyTorch's process-group records,
``pg_name`` and global ``ranks``, in the node's ``inputs.values``; empty ranks mean every NPU), then the
communicator groups file ASTRA-sim takes as ``--comm-group-configuration``: a JSON object mapping each name to its
NPU ids, ``{"1": [0, 1], "2": [2, 3]}`` (``workload.comm_groups``; by default ``<prefix>.json`` beside the trace,
where :mod:`stratasim.workload_layer.traces.convert` writes it). As in ASTRA-sim, an undefined ``pg_name`` ``"0"`` is
PyTorch's default group, every NPU. Any other undefined name, or a group that leaves out the rank issuing the
collective, is an error naming the trace file, the node and the name. A group of every NPU is left empty in the
IR, its spelling of "everyone".

Chakra has no fields for the IR's memory annotations, milestones, roots and sub-microsecond durations, so
StrataSim keeps them in the free-form attributes Chakra provides (other readers, ASTRA-sim among them, skip
unknown attributes): a node's ``memory_bytes`` (integer) and ``milestone`` (``bool_val``), a collective's
``comm_root`` (the root NPU of a broadcast or reduce), a compute node's ``duration_ps`` (the exact duration,
read instead of ``duration_micros``, which then holds it rounded to whole microseconds for other readers), and
the metadata's ``resident_bytes.<kind>``; a priced compute node may also keep the operator it was priced from
(``stratasim.op``, which replays skip: the duration stands). Chakra has no wait node either: the IR's ``WAIT_NODE`` (an NPU waiting
on purpose, neither computing nor communicating) is written as a ``COMP_NODE`` of its duration with the ``bool_val``
attribute ``wait``, which this reader maps back to a wait node; other readers run it as compute of the same length,
so the trace's timing survives and only the split between compute and waiting is theirs to lose.

Attribute values are read from whichever integer variant of ``AttributeProto`` a producer used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from stratasim.chakra import et_def_pb2
from stratasim.chakra.et_def_pb2 import AttributeProto, GlobalMetadata, Node
from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.graph_blocks import foreign
from stratasim.kernel.schema import Section
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.comm_groups import CommGroups, communicator_group, read_comm_groups, trace_groups
from stratasim.workload_layer.traces.et_records import read_records, read_trace, write_records, write_trace
from stratasim.workload_layer.traces.rank_files import RankFileTrace, trace_files

__all__ = [
    "ChakraWorkload",
    "ChakraConfig",
    "read_trace",
    "write_trace",
    "read_records",
    "write_records",
    "read_chakra_graphs",
    "to_graph",
    "trace_files",
    "RankFileTrace",
    "US_TO_PS",
    "MEMORY_ATTR",
    "MILESTONE_ATTR",
    "RESIDENT_ATTR",
    "DURATION_ATTR",
    "ROOT_ATTR",
    "WAIT_ATTR",
    "OP_ATTR",
]

US_TO_PS = 10**6
"""Picoseconds per microsecond: ``duration_ps = duration_micros * US_TO_PS``."""

MEMORY_ATTR = "memory_bytes"
"""The node attribute holding the IR's ``memory_bytes`` (bytes allocated at the start, freed if negative)."""

MILESTONE_ATTR = "milestone"
"""The node attribute (``bool_val``) holding the IR's ``milestone``."""

DURATION_ATTR = "duration_ps"
"""The node attribute holding a compute node's exact duration in picoseconds (``duration_micros`` rounds it)."""

WAIT_ATTR = "wait"
"""The node attribute (``bool_val``) marking a Chakra compute node as the IR's wait node (``WAIT_NODE``)."""

ROOT_ATTR = "comm_root"
"""The node attribute holding a broadcast's or reduce's root NPU (the IR's ``root``)."""

OP_ATTR = "stratasim.op"
"""The node attribute (``bytes_val``: a serialized ``stratasim.v1.OperatorDesc``) keeping the operator a compute
node's duration was priced from, so that ``stratasim trace reshard`` can split or merge it; readers run the
duration and skip it."""

RESIDENT_ATTR = "resident_bytes."
"""The prefix of the metadata attributes ``resident_bytes.<kind>`` holding the graph's ``resident_bytes``."""

_INT_VALUES = frozenset(
    {
        "int32_val",
        "int64_val",
        "uint32_val",
        "uint64_val",
        "sint32_val",
        "sint64_val",
        "fixed32_val",
        "fixed64_val",
        "sfixed32_val",
        "sfixed64_val",
    }
)


def _attr(attrs: Iterable[AttributeProto], name: str, kinds: frozenset[str], where: str) -> object | None:
    """The value of the attribute ``name`` among ``attrs``, which must be of one of ``kinds``; None if absent."""
    for attr in attrs:
        if attr.name != name:
            continue
        kind = attr.WhichOneof("value")
        if kind not in kinds:
            expected = "an integer" if kinds == _INT_VALUES else " or ".join(sorted(kinds))
            raise WorkloadError(f"{where}: attribute {name} is {kind or 'empty'}, expected {expected}")
        return getattr(attr, kind)
    return None


def _attr_int(node: Node, name: str, where: str) -> int | None:
    """The integer attribute ``name`` of ``node`` in whichever integer variant it was written, or None."""
    value = _attr(node.attr, name, _INT_VALUES, where)
    assert value is None or isinstance(value, int)
    return value


def _required(node: Node, name: str, where: str) -> int:
    value = _attr_int(node, name, where)
    if value is None:
        raise WorkloadError(f"{where}: {et_def_pb2.NodeType.Name(node.type)} without the attribute {name}")
    if not 0 <= value < 2**63:
        raise WorkloadError(f"{where}: attribute {name} is {'negative' if value < 0 else 'beyond int64'} ({value})")
    return value


def _peer(node: Node, name: str, where: str, npu: int, npus: int | None) -> int:
    peer = _required(node, name, where)
    if npus is not None and (peer >= npus or peer == npu):
        raise WorkloadError(f"{where}: {name} {peer} is not another NPU of the {npus}")
    return peer


def _resident(metadata: GlobalMetadata, source: str) -> dict[str, int]:
    """The ``resident_bytes.<kind>`` attributes of ``metadata`` by kind."""
    resident = {}
    for attr in metadata.attr:
        if attr.name.startswith(RESIDENT_ATTR):
            kind = attr.WhichOneof("value")
            if kind not in _INT_VALUES or getattr(attr, kind) < 0:
                raise WorkloadError(f"{source}: metadata attribute {attr.name} must be a non-negative integer")
            resident[attr.name.removeprefix(RESIDENT_ATTR)] = getattr(attr, kind)
    return resident


def to_graph(
    nodes: Sequence[Node],
    npu: int,
    npus: int | None,
    source: str | None = None,
    *,
    groups: CommGroups | None = None,
    metadata: GlobalMetadata | None = None,
) -> workload_pb2.ExecutionGraph:
    """The StrataSim execution graph of NPU ``npu`` (of ``npus``) from its Chakra ``nodes``.

    Send and receive peers must be other NPUs below ``npus``, and collectives' communicators must be defined by
    the trace's ``process_group:init`` records or ``groups`` and hold ``npu``; ``npus=None`` (unknown, e.g. when
    one file is inspected alone) skips those checks. ``metadata``, when given, supplies ``resident_bytes``.
    ``source`` (e.g. the file) prefixes every error message, which also names the node.
    """
    label = source or f"NPU {npu}"
    graph = workload_pb2.ExecutionGraph(npu=npu)
    if metadata is not None:
        graph.resident_bytes.update(_resident(metadata, label))
    definitions = [found for found in (trace_groups(nodes, label), groups) if found is not None]
    for node in nodes:
        where = f"{label}: node {node.id}"
        out = graph.nodes.add(
            id=node.id, name=node.name, type=node.type, ctrl_deps=node.ctrl_deps, data_deps=node.data_deps
        )
        _common_fields(node, out, where)
        if node.type == et_def_pb2.COMP_NODE:
            out.duration_ps = _duration_ps(node, where)
            if _attr(node.attr, WAIT_ATTR, frozenset({"bool_val"}), where):
                out.type = workload_pb2.WAIT_NODE
        elif node.type == et_def_pb2.COMM_COLL_NODE:
            _collective_fields(node, out, where, npu, npus, definitions)
        elif node.type in (et_def_pb2.COMM_SEND_NODE, et_def_pb2.COMM_RECV_NODE):
            send = node.type == et_def_pb2.COMM_SEND_NODE
            out.peer = _peer(node, "comm_dst" if send else "comm_src", where, npu, npus)
            out.tag = _attr_int(node, "comm_tag", where) or 0
            out.comm_bytes = _required(node, "comm_size", where)
        elif node.type in (et_def_pb2.MEM_LOAD_NODE, et_def_pb2.MEM_STORE_NODE):
            out.comm_bytes = max(_attr_int(node, "tensor_size", where) or 0, 0)
        elif node.type == et_def_pb2.INVALID_NODE:
            raise WorkloadError(f"{where}: type INVALID_NODE")
    return graph


_COMM_NODES = (et_def_pb2.COMM_COLL_NODE, et_def_pb2.COMM_SEND_NODE, et_def_pb2.COMM_RECV_NODE)
_COLLECTIVES = frozenset(workload_pb2.CollectiveType.values())


def _common_fields(node: Node, out: workload_pb2.Node, where: str) -> None:
    """The fields of ``out`` any node may carry: its memory footprint, whether it is a milestone, its communicator."""
    memory = _attr_int(node, MEMORY_ATTR, where) or 0
    if not -(2**63) <= memory < 2**63:
        raise WorkloadError(f"{where}: attribute {MEMORY_ATTR} is out of range ({memory})")
    out.memory_bytes = memory
    out.milestone = bool(_attr(node.attr, MILESTONE_ATTR, frozenset({"bool_val"}), where))
    if node.type in _COMM_NODES:
        pg_name = _attr(node.attr, "pg_name", frozenset({"string_val"}), where)
        assert pg_name is None or isinstance(pg_name, str)
        out.pg_name = pg_name or ""


def _duration_ps(node: Node, where: str) -> int:
    """A compute node's duration in picoseconds: its exact attribute when it has one, else ``duration_micros``."""
    exact = _attr_int(node, DURATION_ATTR, where)
    if exact is not None and not 0 <= exact < 2**63:
        raise WorkloadError(f"{where}: attribute {DURATION_ATTR} is out of range ({exact})")
    if exact is None and node.duration_micros * US_TO_PS >= 2**63:
        raise WorkloadError(f"{where}: duration_micros {node.duration_micros} does not fit int64 picoseconds")
    return node.duration_micros * US_TO_PS if exact is None else exact


def _collective_fields(
    node: Node,
    out: workload_pb2.Node,
    where: str,
    npu: int,
    npus: int | None,
    definitions: Sequence[CommGroups],
) -> None:
    """A collective node's type, size, communicator group (which must hold ``npu``) and root."""
    comm_type = _required(node, "comm_type", where)
    if comm_type not in _COLLECTIVES:
        raise WorkloadError(f"{where}: unknown comm_type {comm_type}")
    out.comm_type = workload_pb2.CollectiveType.ValueType(comm_type)
    out.comm_bytes = _required(node, "comm_size", where)
    if out.pg_name:
        out.group.extend(communicator_group(out.pg_name, where, npu, npus, definitions))
    root = _attr_int(node, ROOT_ATTR, where)
    if root is not None:
        if not 0 <= root < (2**32 if npus is None else npus):
            raise WorkloadError(f"{where}: attribute {ROOT_ATTR} {root} is not an NPU of the {npus or 'trace'}")
        out.root = root


def read_chakra_graphs(prefix: str | Path, comm_groups: str | Path | None = None) -> list[workload_pb2.ExecutionGraph]:
    """The graphs of every rank of the Chakra trace ``<prefix>.<rank>.et``, index = rank, with communicators
    resolved against the communicator groups file ``comm_groups`` (by default ``<prefix>.json`` if it exists)."""
    files = trace_files(prefix)
    beside = Path(f"{prefix}.json")
    path = comm_groups if comm_groups is not None else beside if beside.is_file() else None
    groups = read_comm_groups(path) if path is not None else None
    graphs = []
    for rank, file in enumerate(files):
        metadata, nodes = read_trace(file)
        graphs.append(to_graph(nodes, rank, len(files), str(file), groups=groups, metadata=metadata))
    return graphs


class ChakraConfig(Section):
    """``workload:`` keys of ``kind: chakra``: ``path`` is the trace prefix (files ``<path>.<rank>.et``);
    ``comm_groups`` the communicator groups file (ASTRA-sim's ``--comm-group-configuration`` JSON; by default
    ``<path>.json`` if it exists), both relative to the study file's folder; ``npus``, when given, must equal the
    number of rank files."""

    study_files: ClassVar[tuple[str, ...]] = ("path", "comm_groups")
    path: str = Field(min_length=1)
    """Prefix of the trace files ``<path>.<rank>.et``, relative to the study file's folder."""
    comm_groups: str | None = Field(default=None, min_length=1)
    """Communicator groups file, ASTRA-sim's ``--comm-group-configuration`` JSON (default ``<path>.json`` if it
    exists)."""
    npus: int | None = Field(default=None, ge=1)
    """Ranks expected; must equal the number of rank files."""


class ChakraWorkload(RankFileTrace):
    """Replays a Chakra trace: NPU ``i`` runs the nodes of ``<path>.<i>.et``."""

    name = "chakra"
    Config = ChakraConfig

    def __init__(self, config: ChakraConfig) -> None:
        super().__init__(config, ".et", "Chakra")
        self.config = config

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        self._check_ranks(npus)
        return foreign(read_chakra_graphs(self.config.path, self.config.comm_groups))
