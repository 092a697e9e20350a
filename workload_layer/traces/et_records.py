"""Chakra ``.et`` files as records: a stream of length-delimited protobuf messages (a varint32 length, then the
message), one :class:`GlobalMetadata` then :class:`Node` records, read and written with every defect a
:class:`~stratasim.kernel.errors.WorkloadError` naming the file. :mod:`.chakra` maps the nodes onto the workload IR;
:mod:`.convert` writes StrataSim's own traces through the same record functions."""

from __future__ import annotations

import mmap
from collections.abc import Iterable
from pathlib import Path

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from stratasim.chakra import et_def_pb2
from stratasim.chakra.et_def_pb2 import GlobalMetadata, Node
from stratasim.kernel.errors import InputError, WorkloadError
from stratasim.kernel.safe_load import TRACE_BYTES, read_bytes

__all__ = ["length_prefix", "read_records", "read_trace", "write_records", "write_trace"]


def read_records(path: str | Path) -> list[tuple[int, bytes]]:
    """The length-delimited records of ``path`` as ``(byte offset of the length prefix, payload)``.

    Raises :class:`WorkloadError` if the file cannot be read or ends inside a length prefix or a record.
    """
    try:
        data = read_bytes(path, TRACE_BYTES, "trace")
    except InputError as exc:
        raise WorkloadError(str(exc)) from None
    records: list[tuple[int, bytes]] = []
    position = 0
    while position < len(data):
        start = position
        prefix = length_prefix(data, position)
        if prefix is None:
            raise WorkloadError(f"{path}: truncated record at byte {start} (bad length prefix)")
        length, position = prefix
        if position + length > len(data):
            raise WorkloadError(
                f"{path}: truncated record at byte {start} ({length} bytes announced, {len(data) - position} left)"
            )
        records.append((start, data[position : position + length]))
        position += length
    return records


def length_prefix(data: bytes | mmap.mmap, position: int) -> tuple[int, int] | None:
    """The varint length prefix at ``position`` of ``data`` and the position after it; None when ``data`` ends
    inside it or it runs past 32 bits."""
    length, shift, end = 0, 0, len(data)
    while True:
        if position >= end or shift > 28:
            return None
        byte = data[position]
        position += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return length, position


def write_records(path: str | Path, messages: Iterable[Message]) -> None:
    """Write ``messages`` to ``path`` as length-delimited records, making its folder if need be; raises
    :class:`WorkloadError` on I/O failure."""
    chunks: list[bytes] = []
    for message in messages:
        payload = message.SerializeToString()
        chunks += [_varint(len(payload)), payload]
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"".join(chunks))
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot write the trace: {exc.strerror or exc}") from None


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _parse(message: Message, payload: bytes, strict: bool) -> bool:
    """Parse ``payload`` into ``message``; False if it is corrupt or, when ``strict``, has unknown fields.

    Metadata is parsed strictly because a node record also parses as ``GlobalMetadata`` with unknown fields;
    nodes are not, so traces from newer Chakra versions with extra node fields still load.
    """
    try:
        message.ParseFromString(payload)
    except DecodeError:
        return False
    return not strict or len(UnknownFieldSet(message)) == 0


def read_trace(path: str | Path) -> tuple[GlobalMetadata, list[Node]]:
    """The metadata and nodes of one Chakra ``.et`` file; raises :class:`WorkloadError` naming the file and the
    defect (unreadable, truncated, unparsable record, no metadata, duplicate node id, unknown node type)."""
    records = read_records(path)
    if not records:
        raise WorkloadError(f"{path}: empty trace, no GlobalMetadata record")
    metadata = GlobalMetadata()
    offset, payload = records[0]
    if not _parse(metadata, payload, strict=True):
        if _parse(Node(), payload, strict=False):
            raise WorkloadError(f"{path}: no GlobalMetadata record: the first record is a node")
        raise WorkloadError(f"{path}: the record at byte {offset} is not a GlobalMetadata message")
    nodes: list[Node] = []
    seen: set[int] = set()
    known_types = set(et_def_pb2.NodeType.values())
    for offset, payload in records[1:]:
        node = Node()
        if not _parse(node, payload, strict=False):
            raise WorkloadError(f"{path}: the record at byte {offset} is not a Node message")
        if node.id in seen:
            raise WorkloadError(f"{path}: node id {node.id} is used twice (second at byte {offset})")
        if node.type not in known_types:
            raise WorkloadError(f"{path}: node {node.id} has unknown type value {node.type}")
        seen.add(node.id)
        nodes.append(node)
    return metadata, nodes


def write_trace(path: str | Path, metadata: GlobalMetadata, nodes: Iterable[Node]) -> None:
    """Write one Chakra ``.et`` file: ``metadata`` then ``nodes``, each length-delimited."""
    write_records(path, [metadata, *nodes])
