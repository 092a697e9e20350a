"""The inter-chip pass (DFModel Sec. IV): the MILP's optimum equals exhaustive enumeration of the same space;
a GPT layer gets Megatron's sharding; bad input and time-outs get one clear answer."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratasim.kernel import operators
from stratasim.optimize.inter_chip import (
    InterChipError,
    InterChipProblem,
    NetworkDim,
    enumerate_inter_chip,
    solve_inter_chip,
)
from stratasim.optimize.milp import SolverError
from stratasim.workload_layer.dataflow.generators.gpt import gpt3_1t
from stratasim.workload_layer.dataflow.graph import DataflowGraph, GraphError, Kernel, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import attention_schemes, elementwise_schemes, gemm_schemes, replicated
from tests.optimize.inter_chip_cases import gpt_layer, gpt_problem, ring_collectives, roofline_time

FAMILIES = {
    "gemm": lambda: gemm_schemes(True),
    "gemm2": lambda: gemm_schemes(False),
    "ew": lambda: elementwise_schemes(1),
    "ew2": lambda: elementwise_schemes(2),
    "attn": attention_schemes,
}


@st.composite
def small_problems(draw: st.DrawFn, overlap: bool) -> InterChipProblem:
    """Two or three kernels of any kind, random tensors between them, one or two network dimensions, random
    kernel times from 1 us to 1 ms (a kernel's work shrinks with tp when its scheme splits it; attention's heads
    may not split over 4) and ring collectives. Times stay within a few decades of one another, as real ones do:
    the solver tells apart choices that differ by more than about 1e-6 of the largest time it is given."""
    kernels, work = [], {}
    for i in range(draw(st.integers(2, 3))):
        family = draw(st.sampled_from(sorted(FAMILIES)))
        weights = draw(st.sampled_from([0, 10**6, 10**8])) if family.startswith("gemm") else 0
        kernel = Kernel(f"k{i}", operators.elementwise([8]), FAMILIES[family](), weight_bytes=weights)
        kernels.append(kernel)
        for scheme in kernel.schemes:
            work[kernel.name, scheme.name] = draw(st.integers(1, 1000)) * 10**6
    tensors = []
    for j, kernel in enumerate(kernels[1:], start=1):
        for slot in range(kernel.slots):
            if slot == 0 or draw(st.booleans()):
                source = kernels[draw(st.integers(0, j - 1))].name
                size = draw(st.sampled_from([0, 10**5, 10**7]))
                tensors.append(Tensor(f"t{len(tensors)}", source, kernel.name, size, slot))
    graph = DataflowGraph(
        "random", tuple(kernels), tuple(tensors), draw(st.sampled_from([1, 1, 2, 4])), draw(st.booleans())
    )
    dims = tuple(
        NetworkDim(
            draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1e9, 1e11])), draw(st.sampled_from([0, 10**6]))
        )
        for _ in range(draw(st.integers(1, 2)))
    )

    def kernel_time(kernel: Kernel, scheme: Scheme, tp: int) -> float:
        if scheme.name == "heads" and tp > 2:
            raise GraphError(f"kernel {kernel.name!r}", "heads do not divide")
        return work[kernel.name, scheme.name] / (tp if scheme.split else 1)

    return InterChipProblem(
        graph=graph,
        dims=dims,
        memory_bytes=draw(st.sampled_from([10**6, 10**8, 10**9, 10**12])),
        kernel_time=kernel_time,
        collective_time=ring_collectives(dims),
        micro_batches=draw(st.sampled_from([1, 2, 4])),
        max_stages=draw(st.integers(1, 4)),
        overlap=overlap,
    )


def _same_optimum(problem: InterChipProblem) -> None:
    try:
        expected = enumerate_inter_chip(problem)
    except InterChipError as error:
        assert "does not fit" in str(error)
        with pytest.raises(InterChipError, match="does not fit"):
            solve_inter_chip(problem)
        return
    got = solve_inter_chip(problem, gap=1e-9)
    assert got.status == "optimal"
    assert got.iteration_ps == pytest.approx(expected.iteration_ps, rel=1e-6, abs=1e-3), (got, expected)
    assert got.memory_bytes <= problem.memory_bytes
    assert got.tp * got.pp * got.dp == math.prod(d.size for d in problem.dims)


_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(small_problems(overlap=True))
def test_milp_equals_enumeration_overlapped(problem: InterChipProblem) -> None:
    """DFModel's eq. 7: a stage's time is max(compute, conversions, sends)."""
    _same_optimum(problem)


@_SETTINGS
@given(small_problems(overlap=False))
def test_milp_equals_enumeration_serialised(problem: InterChipProblem) -> None:
    """A stage's time is max(compute + conversions, sends)."""
    _same_optimum(problem)


def test_gpt_layer_gets_megatron_sharding() -> None:
    """With a slow outer dimension, TP takes the fast inner one and the GEMMs go column, row, column, row: four
    all-reduces per layer per iteration pass (two forward, two backward), as DFModel reports."""
    solution = solve_inter_chip(gpt_problem(overlap=False))
    assert solution.roles[0] == "tp" and solution.tp == 8
    assert [solution.schemes[k] for k in ("qkv", "proj", "ffn0", "ffn1")] == ["n", "k", "n", "k"]
    assert solution.schemes["attn"] == "heads"
    kinds = [(c.direction, c.kind) for c in solution.collectives]
    assert kinds.count(("forward", "all_reduce")) == 2 and kinds.count(("backward", "all_reduce")) == 2
    assert len(kinds) == 4
    assert solution.status == "optimal" and solution.gap <= 1e-6


def test_the_generated_gpt3_1t_gets_megatron_sharding() -> None:
    """The dataflow generator's GPT3 1T (128 layers) on 8 NVLink devices times 2^7 over a slower network, 512
    micro-batches: TP over the 8, the GEMMs column, row, column, row, proved optimal in about a second."""
    dims = (NetworkDim(8, 300e9, 1_000_000),) + (NetworkDim(2, 25e9, 5_000_000),) * 7
    problem = InterChipProblem(
        gpt3_1t(), dims, 80 * 10**9, roofline_time, ring_collectives(dims), micro_batches=512, max_stages=128
    )
    solution = solve_inter_chip(problem)
    assert solution.status == "optimal" and solution.tp == 8 and solution.roles[0] == "tp"
    gemms = ("qkv", "attention projection", "mlp up", "mlp down")
    assert [solution.schemes[k] for k in gemms] == ["n", "k", "n", "k"]
    assert sorted(c.kind for c in solution.collectives) == ["all_reduce"] * 4
    assert solution.memory_bytes <= problem.memory_bytes


def test_gpt_layer_milp_matches_enumeration() -> None:
    """The same optimum both ways on the GPT layer (stages splitting its 8 repetitions)."""
    problem = gpt_problem(graph=gpt_layer(layers=4), micro_batches=4)
    assert solve_inter_chip(problem).iteration_ps == pytest.approx(enumerate_inter_chip(problem).iteration_ps)


def test_iteration_time_is_its_terms() -> None:
    """iteration = (micro_batches / dp + pp - 1) x slowest stage + exposed gradient reductions."""
    problem = gpt_problem(overlap=False)
    s = solve_inter_chip(problem)
    steps = problem.micro_batches // s.dp + s.pp - 1
    assert s.iteration_ps == pytest.approx(steps * s.stage_ps + s.weight_sum_ps + s.dp_ps)
    assert s.stage_ps == pytest.approx(max(s.compute_ps + s.conversion_ps, s.p2p_ps))
    assert s.repeats_per_stage * s.pp == problem.graph.repeat


def test_a_model_that_fits_nowhere_names_memory() -> None:
    """Infeasible: the message gives the least memory any mapping needs and the capacity."""
    with pytest.raises(InterChipError, match=r"does not fit: the least memory any mapping needs is .* GiB per device"):
        solve_inter_chip(gpt_problem(memory_bytes=10**8))


def test_a_graph_with_a_cycle_is_refused() -> None:
    kernels = tuple(Kernel(n, operators.elementwise([8]), elementwise_schemes(1)) for n in "ab")
    tensors = (Tensor("x", "a", "b", 8), Tensor("y", "b", "a", 8))
    with pytest.raises(GraphError, match="has a cycle: a -> b -> a|has a cycle: b -> a -> b"):
        DataflowGraph("loop", kernels, tensors)


def test_bad_problem_fields_are_named() -> None:
    with pytest.raises(InterChipError, match="network dimension 0: size must be at least 1.*micro_batches"):
        gpt_problem(dims=(NetworkDim(0, 1e9),), micro_batches=0)


def test_a_time_out_returns_the_best_mapping_and_its_gap() -> None:
    """Past its time limit the pass returns the best mapping found and the gap proved (test_milp shows the
    solver stopping with an incumbent deterministically; here the search may also end, or, on a loaded machine,
    stop before it found any mapping, which must then be said in one clear message)."""
    try:
        solution = solve_inter_chip(_chain_problem(kernels=12), time_limit_s=0.5)
    except SolverError as error:
        assert "graph 'chain': the solver found no solution within its time limit of 0.5 s" in str(error)
        return
    assert solution.status in ("time_limit", "optimal")
    assert solution.bound_ps <= solution.iteration_ps * (1 + 1e-9)
    assert solution.gap >= 0 and solution.iteration_ps > 0


def test_a_time_out_without_a_mapping_says_so() -> None:
    with pytest.raises(SolverError, match="graph 'chain': the solver found no solution within its time limit of 0 s"):
        solve_inter_chip(_chain_problem(kernels=4), time_limit_s=0)


def test_solves_are_deterministic() -> None:
    problem = _chain_problem(kernels=6)
    first, second = solve_inter_chip(problem), solve_inter_chip(problem)
    assert (first.roles, first.schemes, first.stages) == (second.roles, second.schemes, second.stages)
    assert first.iteration_ps == second.iteration_ps


def test_a_pipeline_cut_follows_the_tensors() -> None:
    """Kernels that cannot be sharded, 3 devices and 8 micro-batches (DP would need a multiple of 3): the best
    is three pipeline stages, cut where the work (1, 2, 3, 1, 2, 3) balances best: 3, 4, 5."""
    problem = _chain_problem(kernels=6, dims=(NetworkDim(3, 1e11),), schemes=(replicated(1),))
    solution = solve_inter_chip(problem)
    assert solution.pp == 3
    assert [solution.stages[f"k{i}"] for i in range(6)] == [0, 0, 1, 1, 2, 2]
    assert solution.stage_ps == pytest.approx(5e9)
    assert solution.iteration_ps == pytest.approx(enumerate_inter_chip(problem).iteration_ps)


def _chain_problem(
    kernels: int, dims: tuple[NetworkDim, ...] | None = None, schemes: tuple[Scheme, ...] = gemm_schemes(True)
) -> InterChipProblem:
    """A chain of GEMMs with weights, of uneven work (1, 2, 3, 1, 2, 3... ms), on a 2 x 2 x 2 system."""
    dims = dims or (NetworkDim(2, 1e11, 1000), NetworkDim(2, 5e10, 1000), NetworkDim(2, 1e10, 1000))
    chain = tuple(Kernel(f"k{i}", operators.gemm(256, 256, 256), schemes, weight_bytes=2**20) for i in range(kernels))
    tensors = tuple(Tensor(f"t{i}", f"k{i}", f"k{i + 1}", 2**20) for i in range(kernels - 1))

    def kernel_time(kernel: Kernel, scheme: Scheme, tp: int) -> float:
        work = 1e9 * (1 + int(kernel.name[1:]) % 3)
        return work / tp if scheme.split else work

    return InterChipProblem(
        graph=DataflowGraph("chain", chain, tensors, training=True),
        dims=dims,
        memory_bytes=10**12,
        kernel_time=kernel_time,
        collective_time=ring_collectives(dims),
        micro_batches=8,
        max_stages=8,
    )


def test_fixed_roles_give_the_best_mapping_of_that_split() -> None:
    """Roles fixed to TP on the inner dimension and DP on the outer: the same sharding, dp = 4."""
    solution = solve_inter_chip(gpt_problem(overlap=False, roles=("tp", "dp")))
    assert (solution.tp, solution.pp, solution.dp) == (8, 1, 4)
    assert [solution.schemes[k] for k in ("qkv", "proj", "ffn0", "ffn1")] == ["n", "k", "n", "k"]


def test_invalid_fixed_roles_say_why() -> None:
    with pytest.raises(
        InterChipError, match="the roles dp, dp are not valid: dp = 32 does not divide micro_batches = 8"
    ):
        solve_inter_chip(gpt_problem(roles=("dp", "dp")))
    with pytest.raises(InterChipError, match="roles must give each of the 2 dimensions one of tp, pp, dp"):
        gpt_problem(roles=("tp",))
