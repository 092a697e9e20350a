"""The inter-chip problem of a dataflow graph on a system of DataflowChips: the time functions DFModel's inter-chip
pass reads, from the chip's own model and the closed-form collectives of the system's network dimensions.

:func:`kernel_by_kernel_time` prices a kernel as a chip running it alone on all its tiles: each operator (forward,
and backward in training) at the slower of DFModel's quantised compute on every tile and its bytes over the DRAM
bandwidth. :func:`closed_form_collectives` times a layout conversion as the event engine runs it on the analytical
network (:func:`~stratasim.system_layer.collectives.first_order.collective_ps`: ring algorithms on ring and switch
dimensions, direct on fully connected ones, one phase per dimension) and a pipeline send as one message to the
neighbouring stage along the innermost pipeline dimension. :func:`inter_chip_problem` puts them together.
"""

from __future__ import annotations

from fractions import Fraction

from stratasim.compute_layer.dataflow_chips import DataflowChip
from stratasim.optimize.inter_chip_problem import (
    CollectiveKind,
    CollectiveTime,
    InterChipProblem,
    KernelTime,
    NetworkDim,
)
from stratasim.system_layer.collectives.first_order import DimensionKind, LineSpan, collective_ps, send_ps
from stratasim.v1 import network_pb2
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Scheme
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator

__all__ = ["kernel_by_kernel_time", "closed_form_collectives", "network_dims", "inter_chip_problem"]

_PS = 1e12
_KINDS: dict[int, DimensionKind] = {
    network_pb2.Dimension.RING: "ring",
    network_pb2.Dimension.SWITCH: "switch",
    network_pb2.Dimension.FULLY_CONNECTED: "fully_connected",
}
_ALGORITHM: dict[DimensionKind, str] = {"ring": "ring", "switch": "ring", "fully_connected": "direct"}


def kernel_by_kernel_time(chip: DataflowChip, training: bool) -> KernelTime:
    """``kernel_time`` for the inter-chip pass: one device's share of a kernel, forward (and backward when
    ``training``), each operator alone on all of ``chip``'s tiles at the slower of its compute and its DRAM
    traffic."""

    def time(kernel: Kernel, scheme: Scheme, tp: int) -> float:
        share = sharded_operator(kernel, scheme, tp)
        ops = (share, *backward_operators(share)) if training else (share,)
        seconds = sum(max(chip.kernel_seconds(op, chip.tiles), op.bytes / chip.dram_bandwidth) for op in ops)
        return seconds * _PS

    return time


def _span(dim: network_pb2.Dimension, size: int | None = None) -> LineSpan:
    kind = _KINDS.get(dim.kind)
    if kind is None:
        raise ValueError(f"a design-space dimension must be a ring, switch or fully connected one, not kind {dim.kind}")
    rate = Fraction(dim.bandwidth_bytes_per_s)
    bandwidth = rate.numerator if rate.denominator == 1 else rate
    return LineSpan(kind, size or dim.size, bandwidth, dim.latency_ps, None, dim.size)


def closed_form_collectives(topology: network_pb2.Topology) -> CollectiveTime:
    """``collective_time`` for the inter-chip pass on ``topology``'s dimensions (see the module)."""
    dims = tuple(topology.dimensions)

    def time(kind: CollectiveKind, size: int, group: tuple[int, ...]) -> float:
        if kind == "send":
            return float(send_ps(size, [(_span(dims[group[0]], 2), 1)]))
        spans = [_span(dims[d]) for d in group]
        return float(collective_ps(kind, size, spans, [_ALGORITHM[span.kind] for span in spans]))

    return time


def network_dims(topology: network_pb2.Topology) -> tuple[NetworkDim, ...]:
    """The inter-chip pass's view of ``topology``: each dimension's size, bandwidth and latency."""
    return tuple(NetworkDim(d.size, d.bandwidth_bytes_per_s, d.latency_ps) for d in topology.dimensions)


def inter_chip_problem(
    graph: DataflowGraph,
    chip: DataflowChip,
    topology: network_pb2.Topology,
    micro_batches: int,
    max_stages: int = 128,
) -> InterChipProblem:
    """The inter-chip problem of ``graph`` (``micro_batches`` an iteration) on chips like ``chip`` (its DRAM
    capacity each) connected by ``topology``, priced kernel by kernel; DFModel's overlapped stage time (eq. 7)."""
    return InterChipProblem(
        graph=graph,
        dims=network_dims(topology),
        memory_bytes=chip.dram_capacity,
        kernel_time=kernel_by_kernel_time(chip, graph.training),
        collective_time=closed_form_collectives(topology),
        micro_batches=micro_batches,
        max_stages=max_stages,
    )
