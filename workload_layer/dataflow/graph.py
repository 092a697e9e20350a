"""A dataflow graph: kernels (vertices) and the tensors they pass (edges), each kernel with its sharding schemes.

DFModel (Sec. III) maps a workload given as a directed acyclic graph onto a system. A :class:`Kernel` is one
operator of the compute layer's vocabulary at its whole, unsharded size (its ``flops`` and ``bytes`` filled), the
weights it holds, and the :class:`Scheme` s by which a group of devices may share it (DFModel's per-kernel sharding
strategies, Fig. 4A). A :class:`Tensor` has one producer and one consumer (DFModel replicates a tensor with several
consumers) and lands in one input slot of its consumer. ``repeat`` runs the graph that many times in sequence per
pass (a model's identical layers); ``training`` adds the backward pass: gradients flow back along every tensor
and weights' gradients are reduced.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from stratasim.kernel.errors import WorkloadError
from stratasim.v1 import compute_pb2

__all__ = ["Layout", "LAYOUTS", "Scheme", "Kernel", "Tensor", "DataflowGraph", "GraphError"]

Layout: TypeAlias = Literal["R", "S0", "S1", "P"]
"""How a tensor lies on a group of devices: ``R`` replicated (each holds all of it), ``S0`` split by rows (its
leading dimension: tokens, samples), ``S1`` split by columns (its trailing dimension: features, heads), ``P``
partial sums (each holds a full-size addend; only a kernel's output may be partial)."""

LAYOUTS: tuple[Layout, ...] = ("R", "S0", "S1", "P")


class GraphError(WorkloadError):
    """A dataflow graph that cannot be mapped; ``where`` names the kernel, tensor or key at fault."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


@dataclass(frozen=True)
class Scheme:
    """One way a group of devices shares a kernel (DFModel's sharding strategy).

    ``inputs`` is the layout each input slot must arrive in and ``output`` the layout of the result. ``divides``
    names the dimension of the kernel's operator the scheme splits among the group (``m``, ``n``, ``k`` or
    ``batch`` of a GEMM, ``elements`` of an element-wise operator, ``batch`` or ``queries`` of attention) or is
    None when every device runs the whole kernel. ``weights_split`` says whether the kernel's weights are divided
    among the group (False: each device holds them all, and in training their gradients are summed over it).
    """

    name: str
    inputs: tuple[Layout, ...]
    output: Layout
    divides: str | None
    weights_split: bool = True

    @property
    def split(self) -> bool:
        """Whether the group divides the kernel's work (False: each device runs all of it)."""
        return self.divides is not None


@dataclass(frozen=True)
class Kernel:
    """A vertex: ``operator`` at its whole size, the ``weight_bytes`` it holds and its sharding ``schemes``
    (the first is the default when nothing is chosen)."""

    name: str
    operator: compute_pb2.OperatorDesc
    schemes: tuple[Scheme, ...]
    weight_bytes: int = 0

    @property
    def flops(self) -> int:
        """Operations of the whole kernel (a multiply-add counts two)."""
        return self.operator.flops

    @property
    def slots(self) -> int:
        """How many input slots it has (every scheme gives each a layout)."""
        return len(self.schemes[0].inputs)

    def scheme(self, name: str) -> Scheme:
        """The scheme called ``name``; :class:`GraphError` when the kernel has none of that name."""
        for scheme in self.schemes:
            if scheme.name == name:
                return scheme
        names = ", ".join(s.name for s in self.schemes)
        raise GraphError(f"kernel {self.name!r}", f"has no sharding scheme {name!r} (it has {names})")


@dataclass(frozen=True)
class Tensor:
    """An edge: ``bytes`` produced by kernel ``source`` and consumed by kernel ``target`` in input ``slot``."""

    name: str
    source: str
    target: str
    bytes: int
    slot: int = 0


@dataclass(frozen=True)
class DataflowGraph:
    """Kernels and tensors forming a directed acyclic graph, checked when built (:class:`GraphError`)."""

    name: str
    kernels: tuple[Kernel, ...]
    tensors: tuple[Tensor, ...]
    repeat: int = 1
    training: bool = False
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for number, kernel in enumerate(self.kernels):
            _check_kernel(kernel)
            if kernel.name in index:
                raise GraphError(f"kernel {kernel.name!r}", "is named twice; kernel names must be unique")
            index[kernel.name] = number
        if not index:
            raise GraphError(f"graph {self.name!r}", "has no kernels")
        if self.repeat < 1:
            raise GraphError(f"graph {self.name!r}", f"repeat must be at least 1, not {self.repeat}")
        object.__setattr__(self, "_index", index)
        self._check_tensors()
        self.order()

    def kernel(self, name: str) -> Kernel:
        """The kernel called ``name``."""
        return self.kernels[self._index[name]]

    def position(self, name: str) -> int:
        """The index of kernel ``name`` in :attr:`kernels`."""
        return self._index[name]

    def order(self) -> tuple[Kernel, ...]:
        """The kernels in a topological order (producers first, ties in declaration order); :class:`GraphError`
        naming a cycle when there is one."""
        waiting = {k.name: 0 for k in self.kernels}
        for tensor in self.tensors:
            waiting[tensor.target] += 1
        ready = [k.name for k in self.kernels if waiting[k.name] == 0]
        done: list[Kernel] = []
        while ready:
            name = ready.pop(0)
            done.append(self.kernel(name))
            for tensor in self.tensors:
                if tensor.source == name:
                    waiting[tensor.target] -= 1
                    if waiting[tensor.target] == 0:
                        ready.append(tensor.target)
        if len(done) < len(self.kernels):
            raise GraphError(f"graph {self.name!r}", f"has a cycle: {' -> '.join(self._cycle(waiting))}")
        return tuple(done)

    def inputs_of(self, name: str) -> Iterator[Tensor]:
        """The tensors kernel ``name`` consumes."""
        return (t for t in self.tensors if t.target == name)

    def outputs_of(self, name: str) -> Iterator[Tensor]:
        """The tensors kernel ``name`` produces."""
        return (t for t in self.tensors if t.source == name)

    def _check_tensors(self) -> None:
        names: set[str] = set()
        taken: set[tuple[str, int]] = set()
        for tensor in self.tensors:
            where = f"tensor {tensor.name!r}"
            if tensor.name in names:
                raise GraphError(where, "is named twice; tensor names must be unique")
            names.add(tensor.name)
            for end in (tensor.source, tensor.target):
                if end not in self._index:
                    raise GraphError(where, f"names kernel {end!r}, which the graph does not have")
            if tensor.source == tensor.target:
                raise GraphError(where, f"goes from kernel {tensor.source!r} to itself (a cycle)")
            if tensor.bytes < 0:
                raise GraphError(where, f"bytes must be at least 0, not {tensor.bytes}")
            slots = self.kernel(tensor.target).slots
            if not 0 <= tensor.slot < slots:
                raise GraphError(where, f"slot {tensor.slot}: kernel {tensor.target!r} has inputs 0 to {slots - 1}")
            if (tensor.target, tensor.slot) in taken:
                raise GraphError(where, f"fills input {tensor.slot} of kernel {tensor.target!r}, which another does")
            taken.add((tensor.target, tensor.slot))

    def _cycle(self, waiting: dict[str, int]) -> list[str]:
        """A cycle among the kernels still ``waiting`` for inputs (every one of them lies on or behind one)."""
        left = {name for name, count in waiting.items() if count > 0}
        start = next(k.name for k in self.kernels if k.name in left)
        path = [start]
        while True:
            step = next(t.source for t in self.tensors if t.target == path[-1] and t.source in left)
            if step in path:
                cycle = path[path.index(step) :][::-1]
                return cycle + [cycle[0]]
            path.append(step)


def _check_kernel(kernel: Kernel) -> None:
    where = f"kernel {kernel.name!r}"
    if not kernel.schemes:
        raise GraphError(where, "has no sharding scheme")
    slots = {len(s.inputs) for s in kernel.schemes}
    if len(slots) > 1:
        raise GraphError(where, f"its schemes give different numbers of inputs: {sorted(slots)}")
    if len({s.name for s in kernel.schemes}) < len(kernel.schemes):
        raise GraphError(where, "names a sharding scheme twice")
    for scheme in kernel.schemes:
        if "P" in scheme.inputs:
            raise GraphError(where, f"scheme {scheme.name!r}: an input cannot be partial sums (P)")
    if kernel.weight_bytes < 0:
        raise GraphError(where, f"weight_bytes must be at least 0, not {kernel.weight_bytes}")
