"""The terms of a dataflow mapping's estimate, and notes on where its event simulation may differ.

The inter-chip estimate of an iteration is ``(m + pp - 1) x stage + gradients``: ``m`` micro-batches per pipeline
at the slowest stage's pace, the pipeline's fill and drain, then the gradient reductions. :func:`estimate_terms`
splits it into those named parts, which sum to it. :func:`notes` says, for the mapping at hand, which of the
estimate's assumptions the engine does not share: the estimate is exact (to rounding) when none applies.
"""

from __future__ import annotations

from stratasim.optimize.inter_chip import InterChipProblem, InterChipSolution
from stratasim.optimize.result import Objective
from stratasim.workload_layer.dataflow.graph import DataflowGraph

__all__ = ["estimate_terms", "notes"]


def estimate_terms(problem: InterChipProblem, solution: InterChipSolution) -> dict[str, int]:
    """The estimate's parts in ps: the steady pipeline, its fill and drain, the gradient sums over TP and the DP
    all-reduces; they sum to ``round(solution.iteration_ps)`` within a picosecond each."""
    micro_batches = problem.micro_batches // solution.dp
    return {
        "pipeline_steady": round(micro_batches * solution.stage_ps),
        "pipeline_fill_drain": round((solution.pp - 1) * solution.stage_ps),
        "tp_weight_gradient_sum": round(solution.weight_sum_ps),
        "dp_all_reduce": round(solution.dp_ps),
    }


def notes(
    problem: InterChipProblem, solution: InterChipSolution, simulated: int | None, objective: Objective
) -> tuple[str, ...]:
    """Why the simulated time may differ from the estimate for this mapping, and what the objective means."""
    graph = problem.graph
    said = []
    if simulated is not None:
        difference = (solution.iteration_ps - simulated) / simulated if simulated else 0.0
        said.append(
            f"estimate {solution.iteration_ps / 1e6:.6g} us, simulated {simulated / 1e6:.6g} us ({difference:+.2%})"
        )
    if problem.overlap:
        said.append(
            "overlap: the estimate overlaps each stage's compute, layout conversions and sends (DFModel eq. 7); the "
            "engine waits for a blocking collective before the kernel that takes its tensor, so it runs longer"
        )
    if solution.pp > 1:
        said.append(
            "pipeline: the estimate runs every stage at the slowest stage's pace for (m + pp - 1) steps with the "
            "sends hidden behind compute, each TP rank sending its share; the engine runs each stage at its own "
            "pace, sends a replicated or partial-sum tensor whole, and the fill and drain wait for 2 (pp - 1) sends"
        )
    if graph.training:
        said.extend(_training_notes(solution))
    if _partial_outputs(graph, solution):
        said.append(
            "partial outputs: the engine all-reduces over TP a graph output its kernel leaves as partial sums; "
            "the estimate does not price that all-reduce"
        )
    said.append(
        "collectives: closed form on the analytical network, exact for one chunk (system.splits: 1); with more "
        "chunks the pipelining of chunks through the phases is approximated"
    )
    if objective != "time":
        said.append(
            f"{objective}: the hardware is the study's, so its price and power are fixed and every mapping uses every "
            "NPU; the fastest mapping is the best per dollar and per watt too (a mapping leaving devices idle would "
            "not be)"
        )
    return tuple(said)


def _training_notes(solution: InterChipSolution) -> list[str]:
    said = [
        "backward: the engine overlaps an input gradient's layout conversion with the kernel's weight-gradient "
        "GEMM; the estimate serialises them, so it is an upper bound there"
    ]
    if solution.dp > 1:
        said.append(
            "data parallel: the engine all-reduces a stage's weight gradients as one bucket; the estimate as one "
            "all-reduce per kernel (one latency each), so it is longer by the latencies it adds"
        )
    return said


def _partial_outputs(graph: DataflowGraph, solution: InterChipSolution) -> bool:
    """Whether some graph output (a kernel no tensor leaves) is left as partial sums over a TP group."""
    fed = {t.source for t in graph.tensors}
    return solution.tp > 1 and any(
        graph.kernel(name).scheme(scheme).output == "P" for name, scheme in solution.schemes.items() if name not in fed
    )
