"""A Timeloop-style :class:`~stratasim.compute_layer.timeloop.accelerator.Accelerator` as the compute contract's
``TimeloopAccelerator`` message and back, losslessly, so that an accelerator a study describes prices the same
in-process and in another process."""

from __future__ import annotations

from stratasim.compute_layer.timeloop.accelerator import Accelerator, StorageLevel
from stratasim.v1 import compute_pb2

__all__ = ["accelerator_from_message", "accelerator_message"]


def accelerator_message(acc: Accelerator) -> compute_pb2.TimeloopAccelerator:
    """``acc`` as the wire's description of it."""
    return compute_pb2.TimeloopAccelerator(
        name=acc.name,
        rows=acc.rows,
        cols=acc.cols,
        levels=[_level_message(level) for level in acc.levels],
        clock_hz=acc.clock_hz,
        mac_pj=acc.mac_pj,
        source=acc.source,
        dataflow=acc.dataflow or "",
        unrolls=[
            compute_pb2.TimeloopUnroll(kind=kind, rows="".join(sorted(rows)), cols="".join(sorted(cols)))
            for kind, (rows, cols) in sorted(acc.unrolls.items())
        ],
        dram_bandwidth_words_per_cycle=acc.dram_bandwidth,
        onload=sorted(acc.onload),
        zigzag_compat=acc.zigzag_compat,
    )


def accelerator_from_message(message: compute_pb2.TimeloopAccelerator) -> Accelerator:
    """The accelerator ``message`` describes; ValueError saying what is wrong with it (no levels, a zero size...)."""
    return Accelerator(
        name=message.name,
        rows=message.rows,
        cols=message.cols,
        levels=tuple(_level(level) for level in message.levels),
        clock_hz=message.clock_hz,
        mac_pj=message.mac_pj,
        source=message.source,
        dataflow=message.dataflow or None,
        unrolls={unroll.kind: (frozenset(unroll.rows), frozenset(unroll.cols)) for unroll in message.unrolls},
        dram_bandwidth=(
            message.dram_bandwidth_words_per_cycle if message.HasField("dram_bandwidth_words_per_cycle") else None
        ),
        onload=frozenset(message.onload),
        zigzag_compat=message.zigzag_compat,
    )


def _level_message(level: StorageLevel) -> compute_pb2.TimeloopStorageLevel:
    message = compute_pb2.TimeloopStorageLevel(
        name=level.name,
        keeps=sorted(level.keeps),
        partitions=dict(level.partitions),
        read_pj=level.read_pj,
        write_pj=level.write_pj,
        operand_read_pj=dict(level.operand_read_pj),
        operand_write_pj=dict(level.operand_write_pj),
    )
    if level.words is not None:
        message.words = level.words
    if level.read_bandwidth is not None:
        message.read_bandwidth_words_per_cycle = level.read_bandwidth
    if level.write_bandwidth is not None:
        message.write_bandwidth_words_per_cycle = level.write_bandwidth
    if level.shared_bandwidth is not None:
        message.shared_bandwidth_words_per_cycle = level.shared_bandwidth
    return message


def _level(message: compute_pb2.TimeloopStorageLevel) -> StorageLevel:
    read = message.read_bandwidth_words_per_cycle if message.HasField("read_bandwidth_words_per_cycle") else None
    write = message.write_bandwidth_words_per_cycle if message.HasField("write_bandwidth_words_per_cycle") else None
    return StorageLevel(
        name=message.name,
        keeps=frozenset(message.keeps),
        words=message.words if message.HasField("words") else None,
        partitions=dict(message.partitions),
        read_bandwidth=read,
        write_bandwidth=write,
        read_pj=message.read_pj,
        write_pj=message.write_pj,
        operand_read_pj=dict(message.operand_read_pj),
        operand_write_pj=dict(message.operand_write_pj),
        shared_bandwidth=(
            message.shared_bandwidth_words_per_cycle if message.HasField("shared_bandwidth_words_per_cycle") else None
        ),
    )
