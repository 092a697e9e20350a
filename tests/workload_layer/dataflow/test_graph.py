"""The dataflow graph's checks: every malformed graph is one :class:`GraphError` naming the kernel, tensor or
graph at fault; a well-formed one has a topological order, producers first and ties in declaration order."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.kernel import operators
from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Kernel, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import elementwise_schemes, gemm_schemes, replicated


def pointwise(name: str, inputs: int = 1) -> Kernel:
    """A small element-wise kernel of ``inputs`` input slots."""
    return Kernel(name, operators.elementwise((8, 8), inputs=inputs, name=name), elementwise_schemes(inputs))


def chain(*names: str) -> tuple[Tensor, ...]:
    """Tensors of 128 bytes linking ``names`` in order."""
    return tuple(Tensor(f"{a}->{b}", a, b, 128) for a, b in zip(names, names[1:]))


def test_a_chain_is_ordered_producers_first() -> None:
    graph = DataflowGraph("g", (pointwise("c"), pointwise("a"), pointwise("b")), chain("a", "b", "c"))
    assert [k.name for k in graph.order()] == ["a", "b", "c"]
    assert graph.position("b") == 2
    assert [t.name for t in graph.inputs_of("b")] == ["a->b"]
    assert [t.name for t in graph.outputs_of("b")] == ["b->c"]


def test_ties_keep_declaration_order() -> None:
    kernels = (pointwise("x"), pointwise("y"), pointwise("z", inputs=2))
    tensors = (Tensor("x->z", "x", "z", 1, slot=1), Tensor("y->z", "y", "z", 1, slot=0))
    assert [k.name for k in DataflowGraph("g", kernels, tensors).order()] == ["x", "y", "z"]


def test_a_graph_is_a_workload_error_naming_its_place() -> None:
    with pytest.raises(WorkloadError, match="kernel 'a': is named twice"):
        DataflowGraph("g", (pointwise("a"), pointwise("a")), ())


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        ((Tensor("t", "a", "nowhere", 1),), "tensor 't': names kernel 'nowhere', which the graph does not have"),
        ((Tensor("t", "ghost", "a", 1),), "tensor 't': names kernel 'ghost'"),
        ((Tensor("t", "a", "a", 1),), "tensor 't': goes from kernel 'a' to itself"),
        ((Tensor("t", "a", "b", -1),), "tensor 't': bytes must be at least 0, not -1"),
        ((Tensor("t", "a", "b", 1, slot=1),), r"tensor 't': slot 1: kernel 'b' has inputs 0 to 0"),
        ((Tensor("t", "a", "b", 1, slot=-1),), r"tensor 't': slot -1"),
        ((Tensor("t", "a", "b", 1), Tensor("t", "b", "c", 1)), "tensor 't': is named twice"),
        ((Tensor("t", "a", "c", 1), Tensor("u", "b", "c", 1)), "tensor 'u': fills input 0 of kernel 'c'"),
    ],
)
def test_bad_tensors_are_named(tensors: tuple[Tensor, ...], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        DataflowGraph("g", (pointwise("a"), pointwise("b"), pointwise("c")), tensors)


def test_a_cycle_is_printed() -> None:
    """The kernels on the cycle in their order, from whichever comes first; not the kernel leading into it."""
    kernels = (pointwise("start"), pointwise("a", 2), pointwise("b"), pointwise("c"))
    tensors = (*chain("start", "a", "b", "c"), Tensor("back", "c", "a", 1, slot=1))
    with pytest.raises(
        GraphError, match=r"graph 'g': has a cycle: (a -> b -> c -> a|b -> c -> a -> b|c -> a -> b -> c)$"
    ) as caught:
        DataflowGraph("g", kernels, tensors)
    assert caught.value.where == "graph 'g'"


def test_a_two_kernel_cycle_is_printed() -> None:
    tensors = (Tensor("ab", "a", "b", 1), Tensor("ba", "b", "a", 1))
    with pytest.raises(GraphError, match=r"has a cycle: (a -> b -> a|b -> a -> b)"):
        DataflowGraph("g", (pointwise("a"), pointwise("b")), tensors)


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (Kernel("k", operators.elementwise((4,)), ()), "kernel 'k': has no sharding scheme"),
        (
            Kernel("k", operators.elementwise((4,)), (replicated(1), replicated(2))),
            r"kernel 'k': its schemes give different numbers of inputs: \[1, 2\]",
        ),
        (Kernel("k", operators.elementwise((4,)), (replicated(1),) * 2), "kernel 'k': names a sharding scheme twice"),
        (
            Kernel("k", operators.elementwise((4,)), (Scheme("s", ("P",), "R", None),)),
            "kernel 'k': scheme 's': an input cannot be partial sums",
        ),
        (
            Kernel("k", operators.elementwise((4,)), (replicated(1),), weight_bytes=-2),
            "kernel 'k': weight_bytes must be at least 0, not -2",
        ),
    ],
)
def test_bad_kernels_are_named(kernel: Kernel, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        DataflowGraph("g", (kernel,), ())


def test_an_empty_graph_and_a_repeat_below_one_are_errors() -> None:
    with pytest.raises(GraphError, match="graph 'g': has no kernels"):
        DataflowGraph("g", (), ())
    with pytest.raises(GraphError, match="graph 'g': repeat must be at least 1, not 0"):
        DataflowGraph("g", (pointwise("a"),), (), repeat=0)


def test_a_kernel_names_its_schemes_and_its_missing_one() -> None:
    kernel = Kernel("mm", operators.gemm(8, 8, 8), gemm_schemes(weights=True))
    assert kernel.scheme("k").output == "P"
    assert kernel.slots == 1 and kernel.flops == 2 * 8**3
    with pytest.raises(GraphError, match=r"kernel 'mm': has no sharding scheme 'heads' \(it has n, k, m, replicate\)"):
        kernel.scheme("heads")


@st.composite
def random_dags(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """A kernel count and edges ``(i, j)`` with ``i < j``: a DAG in index order."""
    count = draw(st.integers(1, 8))
    pairs = [(i, j) for j in range(count) for i in range(j)]
    return count, draw(st.lists(st.sampled_from(pairs), unique=True, max_size=12)) if pairs else []


def dag(count: int, edges: list[tuple[int, int]], order: list[int]) -> DataflowGraph:
    """Kernels ``k0..`` declared in ``order`` with as many input slots as edges into them."""
    slots = {j: sum(1 for _, t in edges if t == j) for j in range(count)}
    kernels = tuple(pointwise(f"k{i}", max(1, slots[i])) for i in order)
    seen: dict[int, int] = {}
    tensors = []
    for i, j in edges:
        tensors.append(Tensor(f"{i}-{j}", f"k{i}", f"k{j}", 4, slot=seen.get(j, 0)))
        seen[j] = seen.get(j, 0) + 1
    return DataflowGraph("g", kernels, tuple(tensors))


@given(random_dags(), st.randoms(use_true_random=False))
def test_every_tensor_runs_after_its_producer(drawn: tuple[int, list[tuple[int, int]]], rng: random.Random) -> None:
    count, edges = drawn
    order = list(range(count))
    rng.shuffle(order)
    graph = dag(count, edges, order)
    ranks = {kernel.name: rank for rank, kernel in enumerate(graph.order())}
    assert len(ranks) == count
    assert all(ranks[t.source] < ranks[t.target] for t in graph.tensors)


@given(random_dags())
def test_closing_a_path_is_a_cycle_error(drawn: tuple[int, list[tuple[int, int]]]) -> None:
    count, edges = drawn
    if not edges:
        return
    first, last = edges[0]
    with pytest.raises(GraphError, match="has a cycle: "):
        dag(count, [*edges, (last, first)], list(range(count)))
