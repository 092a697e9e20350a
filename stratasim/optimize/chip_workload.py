"""What one chip runs of a dataflow graph once the inter-chip pass has sharded it: each kernel's per-device
operator, weights and network time, and the per-device bytes of the tensors between kernels, in a topological order.
The intra-chip pass (:mod:`stratasim.optimize.intra_chip`) maps it onto a chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Layout
from stratasim.workload_layer.dataflow.sharding import sharded_operator

__all__ = ["ChipKernel", "ChipTensor", "ChipWorkload", "chip_workload"]


@dataclass(frozen=True)
class ChipKernel:
    """One kernel as the chip runs it: its per-device ``operator``, the ``weight_bytes`` it reads from DRAM each
    time it runs, and the ``network_seconds`` its communication takes (from the inter-chip pass)."""

    name: str
    operator: compute_pb2.OperatorDesc
    weight_bytes: int = 0
    network_seconds: float = 0.0


@dataclass(frozen=True)
class ChipTensor:
    """A tensor of ``bytes`` (per device) from kernel number ``source`` to kernel number ``target``."""

    name: str
    source: int
    target: int
    bytes: int


@dataclass(frozen=True)
class ChipWorkload:
    """The kernels one chip runs, in a topological order, the tensors between them, and how many times in
    sequence it runs them per pass (``repeat``: a model's identical layers)."""

    name: str
    kernels: tuple[ChipKernel, ...]
    tensors: tuple[ChipTensor, ...]
    repeat: int = 1

    def __post_init__(self) -> None:
        if not self.kernels:
            raise ValueError(f"chip workload {self.name!r} has no kernels")
        for tensor in self.tensors:
            if not 0 <= tensor.source < tensor.target < len(self.kernels):
                raise ValueError(
                    f"chip workload {self.name!r}: tensor {tensor.name!r} must go from an earlier kernel to a later "
                    f"one of the {len(self.kernels)} (kernels are in topological order), not {tensor.source} -> "
                    f"{tensor.target}"
                )


def _share(bytes_: int, layout: Layout, tp: int) -> int:
    return -(-bytes_ // tp) if layout in ("S0", "S1") else bytes_


def _check(graph: DataflowGraph, schemes: Mapping[str, str], tp: int, seconds: Mapping[str, float]) -> None:
    where = f"graph {graph.name!r}"
    if graph.training:
        raise GraphError(where, "is a training graph; the intra-chip pass maps a forward pass only")
    if tp < 1:
        raise GraphError(where, f"tp must be at least 1, not {tp}")
    names = {k.name for k in graph.kernels}
    for key, given in (("schemes", schemes), ("network_seconds", seconds)):
        unknown = sorted(set(given) - names)
        if unknown:
            raise GraphError(where, f"{key} names kernels it does not have: {', '.join(unknown)}")
    for name, value in seconds.items():
        if not value >= 0:
            raise GraphError(where, f"network_seconds[{name!r}] must be at least 0, not {value}")


def chip_workload(
    graph: DataflowGraph,
    *,
    schemes: Mapping[str, str] | None = None,
    tp: int = 1,
    network_seconds: Mapping[str, float] | None = None,
) -> ChipWorkload:
    """What one of ``tp`` devices runs of ``graph`` forward, each kernel under its scheme in ``schemes`` (by
    kernel name; a kernel left out takes its first), with ``network_seconds`` per kernel name (default 0).

    A kernel's operator is its :func:`sharded_operator` share; its weights are divided where its scheme splits
    them; a tensor holds the larger of the shares its producer writes and its consumer reads (a split layout
    holds ``1/tp`` of it, a replicated or partial one all of it). A training graph's backward pass is not mapped
    yet: :class:`GraphError` rather than a forward-only answer; likewise for names the graph does not have.
    """
    _check(graph, schemes or {}, tp, network_seconds or {})
    chosen = {k.name: k.scheme((schemes or {}).get(k.name, k.schemes[0].name)) for k in graph.kernels}
    order = graph.order()
    number = {k.name: i for i, k in enumerate(order)}
    seconds = network_seconds or {}
    kernels = tuple(
        ChipKernel(
            name=k.name,
            operator=sharded_operator(k, chosen[k.name], tp),
            weight_bytes=_share(k.weight_bytes, "S0", tp) if chosen[k.name].weights_split else k.weight_bytes,
            network_seconds=seconds.get(k.name, 0.0),
        )
        for k in order
    )
    tensors = tuple(
        ChipTensor(
            name=t.name,
            source=number[t.source],
            target=number[t.target],
            bytes=max(
                _share(t.bytes, chosen[t.source].output, tp), _share(t.bytes, chosen[t.target].inputs[t.slot], tp)
            ),
        )
        for t in graph.tensors
    )
    return ChipWorkload(graph.name, kernels, tensors, graph.repeat)
