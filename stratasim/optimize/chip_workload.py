"""What one chip runs of a dataflow graph once the inter-chip pass has sharded it: each kernel's per-device
operator, weights and network time, and the per-device bytes of the tensors between kernels, in a topological order.
The intra-chip pass (:mod:`stratasim.optimize.intra_chip`) maps it onto a chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Layout
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator

__all__ = ["ChipKernel", "ChipTensor", "ChipWorkload", "chip_workload", "backward_names"]


@dataclass(frozen=True)
class ChipKernel:
    """One kernel as the chip runs it: its per-device ``operator``, the ``weight_bytes`` it moves between DRAM and
    the chip each time it runs (reading weights, or writing their gradients), and the ``network_seconds`` its
    communication takes (from the inter-chip pass)."""

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
    """The kernels one chip runs, in a topological order, the tensors between them, how many times in sequence it
    runs them per pass (``repeat``: a model's identical layers), the bytes DRAM holds through a pass for each
    repeat (``held_bytes``; None: the kernels' weights), and how many inputs (micro-batches) a dataflow partition
    streams through once configured (``streamed``): its weights cross DRAM once for all of them (DFModel Sec. IV.C,
    "the pipeline in each partition reaches steady-state"), its tensors once for each."""

    name: str
    kernels: tuple[ChipKernel, ...]
    tensors: tuple[ChipTensor, ...]
    repeat: int = 1
    held_bytes: int | None = None
    streamed: int = 1

    @property
    def resident_bytes(self) -> int:
        """What DRAM holds through the whole pass, over every repeat."""
        held = sum(k.weight_bytes for k in self.kernels) if self.held_bytes is None else self.held_bytes
        return held * self.repeat

    def weight_traffic(self, kernel: int) -> int:
        """The DRAM bytes kernel number ``kernel``'s weights (or their gradients) move per input in a dataflow
        partition: its weight bytes shared by the ``streamed`` inputs, rounded up."""
        return -(-self.kernels[kernel].weight_bytes // self.streamed)

    def __post_init__(self) -> None:
        if not self.kernels:
            raise ValueError(f"chip workload {self.name!r} has no kernels")
        if self.streamed < 1:
            raise ValueError(f"chip workload {self.name!r}: streamed must be at least 1, not {self.streamed}")
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
    if tp < 1:
        raise GraphError(where, f"tp must be at least 1, not {tp}")
    names = {k.name for k in graph.kernels}
    backward = set(backward_names(graph)) if graph.training else set()
    for key, given, known in (("schemes", schemes, names), ("network_seconds", seconds, names | backward)):
        unknown = sorted(set(given) - known)
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
    """What one of ``tp`` devices runs of ``graph``, each kernel under its scheme in ``schemes`` (by kernel name;
    a kernel left out takes its first), with ``network_seconds`` per kernel name (default 0; a training graph's
    backward kernels are named as :func:`backward_names` gives).

    A kernel's operator is its :func:`sharded_operator` share; its weights are divided where its scheme splits
    them; a tensor holds the larger of the shares its producer writes and its consumer reads (a split layout
    holds ``1/tp`` of it, a replicated or partial one all of it). A training graph adds its backward pass after
    the forward one. :class:`GraphError` for names the graph does not
    have.
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
    if not graph.training:
        return ChipWorkload(graph.name, kernels, tensors, graph.repeat)
    return _with_backward(ChipWorkload(graph.name, kernels, tensors, graph.repeat), graph, seconds)


_SUFFIXES = {"gemm": ("dgrad", "wgrad"), "elementwise": ("backward",), "attention": ("backward",)}
"""The backward kernels of each kind of kernel, as :func:`backward_operators` returns them: a GEMM's gradient of
its first input (and of nothing else) and of its weights or second input; any other kernel's one."""


def _suffixes(graph: DataflowGraph, name: str) -> tuple[str, ...]:
    kind = graph.kernel(name).operator.WhichOneof("shape")
    if kind not in _SUFFIXES:
        raise GraphError(f"kernel {name!r}", f"no backward pass is known for a {kind} operator")
    return _SUFFIXES[kind]


def backward_names(graph: DataflowGraph) -> list[str]:
    """A training graph's backward kernels in the order they run: each forward kernel's, the last one first (a
    GEMM's ``<name>.dgrad`` then ``<name>.wgrad``, any other kernel's ``<name>.backward``)."""
    return [f"{k.name}.{suffix}" for k in reversed(graph.order()) for suffix in _suffixes(graph, k.name)]


def _with_backward(forward: ChipWorkload, graph: DataflowGraph, seconds: Mapping[str, float]) -> ChipWorkload:
    """``forward`` followed by its backward pass: each kernel's gradient kernels (a GEMM's read its weights and
    write their gradients); each tensor's gradient from its consumer's gradient kernel to every gradient kernel of
    its producer; each tensor also kept from the forward pass for the consumer's gradient kernel that reads it (a
    GEMM's weight gradient reads its first input, its input gradient the second); DRAM holds the weights and their
    gradients."""
    position = {k.name: i for i, k in enumerate(forward.kernels)}
    kernels = list(forward.kernels)
    where: dict[tuple[str, str], int] = {}
    for kernel in reversed(forward.kernels):
        suffixes = _suffixes(graph, kernel.name)
        for suffix, op in zip(suffixes, backward_operators(kernel.operator)):
            where[kernel.name, suffix] = len(kernels)
            name = f"{kernel.name}.{suffix}"
            weights = kernel.weight_bytes if suffix != "backward" else 0
            kernels.append(ChipKernel(name, op, weights, seconds.get(name, 0.0)))
    tensors = list(forward.tensors)
    for edge, tensor in zip(graph.tensors, forward.tensors):
        gemm = graph.kernel(edge.target).operator.WhichOneof("shape") == "gemm"
        gradient = ("dgrad" if edge.slot == 0 else "wgrad") if gemm else "backward"
        reader = ("wgrad" if edge.slot == 0 else "dgrad") if gemm else "backward"
        for suffix in _suffixes(graph, edge.source):
            source, target = where[edge.target, gradient], where[edge.source, suffix]
            tensors.append(ChipTensor(f"d[{edge.name}]>{suffix}", source, target, tensor.bytes))
        kept = ChipTensor(f"{edge.name} (kept)", position[edge.source], where[edge.target, reader], tensor.bytes)
        tensors.append(kept)
    held = 2 * sum(k.weight_bytes for k in forward.kernels)
    return ChipWorkload(forward.name, tuple(kernels), tuple(tensors), forward.repeat, held)
