"""Whether Megatron's sharding of a transformer layer — the one the transformer workload simulates — is the inter-chip
pass's optimum for each TP degree of a plan space.

The plan program (:mod:`stratasim.optimize.plans`) chooses the degrees; the sharding inside a layer is DFModel's
inter-chip pass. For each TP degree above 1 it solves :func:`~stratasim.optimize.inter_chip.solve_inter_chip` on the
study's layer (:func:`~workload_layer.dataflow.generators.gpt.gpt_layer_graph`) over two network dimensions — the TP
group on the study's innermost one, every other NPU on its outermost, roles fixed to TP and DP — with each kernel at
the roofline of the study's chip and ring collectives. Memory is left to the plan program (the capacity here is
unlimited): the question is only which sharding each GEMM takes. Megatron's is column, row, column, row for the
QKV, attention projection, MLP up and MLP down GEMMs, attention by heads: four all-reduces per layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from stratasim.optimize.inter_chip import InterChipError, InterChipProblem, NetworkDim, solve_inter_chip
from stratasim.optimize.inter_chip_problem import CollectiveKind, CollectiveTime
from stratasim.study.economics import study_hardware
from stratasim.workload_layer.dataflow.generators.gpt import gpt_layer_graph
from stratasim.workload_layer.dataflow.graph import Kernel, Scheme
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator
from stratasim.workload_layer.transformer.config import TransformerConfig

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["MEGATRON", "sharding_notes"]

MEGATRON = {
    "qkv": "n",
    "attention projection": "k",
    "mlp up": "n",
    "mlp down": "k",
    "attention": "heads",
    "attention scores": "batch",
    "attention context": "batch",
}
"""Megatron's sharding of a layer's GEMMs (n: by columns, k: by rows) and attention — fused, by heads, or unfused, its
two batched GEMMs by their batch of heads — for the kernels the layer has."""

_UNLIMITED = 2**62


def sharding_notes(study: Study, config: TransformerConfig, tps: Iterable[int]) -> tuple[str, ...]:
    """A note per TP degree of ``tps`` above 1: the inter-chip pass's sharding of ``config``'s layer on ``study``'s
    system, and whether it is Megatron's."""
    hardware = study_hardware(study)
    dims = study.topology_proto().dimensions
    graph = gpt_layer_graph(config)
    micro_batches = max(1, config.parallelism.batch // config.parallelism.micro_batch)

    def kernel_time(kernel: Kernel, scheme: Scheme, tp: int) -> float:
        share = sharded_operator(kernel, scheme, tp)
        ops = (share, *backward_operators(share))
        return sum(max(op.flops / hardware.peak_flops, op.bytes / hardware.memory_bandwidth) * 1e12 for op in ops)

    notes = []
    for tp in sorted(set(tps)):
        if tp == 1 or study.npus % tp or study.npus == tp:
            continue
        network = (
            NetworkDim(tp, dims[0].bandwidth_bytes_per_s, dims[0].latency_ps),
            NetworkDim(study.npus // tp, dims[-1].bandwidth_bytes_per_s, dims[-1].latency_ps),
        )
        problem = InterChipProblem(
            graph, network, _UNLIMITED, kernel_time, _rings(network), micro_batches, 1, False, roles=("tp", "dp")
        )
        try:
            solution = solve_inter_chip(problem, time_limit_s=10.0)
        except InterChipError as exc:
            notes.append(f"TP {tp}: the inter-chip pass could not check the layer's sharding: {exc}")
            continue
        notes.append(_verdict(tp, solution.schemes, [c.kind for c in solution.collectives], solution.status))
    return tuple(notes)


def _verdict(tp: int, schemes: dict[str, str], collectives: list[str], status: str) -> str:
    """The note for one TP degree."""
    chosen = {kernel: schemes[kernel] for kernel in MEGATRON if kernel in schemes}
    proved = "proved optimal" if status == "optimal" else f"solver status {status}"
    if all(scheme == MEGATRON[kernel] for kernel, scheme in chosen.items()):
        return (
            f"TP {tp}: the inter-chip pass picks Megatron's sharding (QKV and MLP-up by columns, projection and "
            f"MLP-down by rows, attention by heads; {collectives.count('all_reduce')} all-reduces per layer), "
            f"{proved}: the sharding the transformer workload simulates"
        )
    said = ", ".join(f"{kernel} {scheme}" for kernel, scheme in chosen.items())
    return (
        f"TP {tp}: the inter-chip pass prefers a sharding other than Megatron's ({said}; {len(collectives)} layout "
        f"conversions per layer, {proved}); the plan is simulated with Megatron's, which the transformer workload "
        "implements"
    )


def _rings(dims: tuple[NetworkDim, ...]) -> CollectiveTime:
    """Collective times on rings, one phase per dimension of the group: all-reduce ``2 (n-1)/n B / bw + 2 (n-1)
    latency``, the others half that; a send ``B / bw + latency`` on the group's slowest dimension (ps)."""

    def time(kind: CollectiveKind, size: int, group: tuple[int, ...]) -> float:
        if kind == "send":
            slowest = min(group, key=lambda d: dims[d].bandwidth)
            return size / dims[slowest].bandwidth * 1e12 + dims[slowest].latency_ps
        steps = 2 if kind == "all_reduce" else 1
        return sum(
            steps
            * (
                (dims[d].size - 1) / dims[d].size * size / dims[d].bandwidth * 1e12
                + (dims[d].size - 1) * dims[d].latency_ps
            )
            for d in group
        )

    return time
