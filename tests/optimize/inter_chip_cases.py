"""Dataflow graphs, systems and closed-form time functions for the inter-chip pass's tests."""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.optimize.inter_chip_problem import CollectiveKind, InterChipProblem, NetworkDim
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import attention_schemes, elementwise_schemes, gemm_schemes, replicated
from stratasim.workload_layer.dataflow.sharding import backward_operators, sharded_operator

PEAK_FLOPS = 989e12
"""An H100's dense bf16 FLOP/s."""
HBM = 3.35e12
"""Its memory bandwidth, bytes/s."""


def gpt_layer(hidden: int = 4096, heads: int = 32, tokens: int = 2048, layers: int = 8) -> DataflowGraph:
    """A Megatron GPT layer (pre-layernorm, no sequence parallelism): layernorm, QKV GEMM, attention, projection,
    residual add, layernorm, two FFN GEMMs around a GeLU, residual add; layernorms and adds replicate-only."""
    h, t, e = hidden, tokens, 2
    act = t * h * e

    def ew(name: str, inputs: int, schemes: tuple[Scheme, ...]) -> Kernel:
        return Kernel(name, operators.elementwise([t, h], inputs=inputs, name=name), schemes)

    def gemm(name: str, k: int, n: int) -> Kernel:
        return Kernel(name, operators.gemm(t, k, n, name=name), gemm_schemes(True), weight_bytes=k * n * e)

    kernels = (
        ew("ln1", 1, (replicated(1),)),
        gemm("qkv", h, 3 * h),
        Kernel("attn", operators.attention(heads, t, t, h // heads, causal=True, name="attn"), attention_schemes()),
        gemm("proj", h, h),
        ew("add1", 2, (replicated(2),)),
        ew("ln2", 1, (replicated(1),)),
        gemm("ffn0", h, 4 * h),
        Kernel("gelu", operators.elementwise([t, 4 * h], name="gelu"), elementwise_schemes(1)),
        gemm("ffn1", 4 * h, h),
        ew("add2", 2, (replicated(2),)),
    )
    edges = [
        ("ln1", "qkv", act, 0),
        ("qkv", "attn", 3 * act, 0),
        ("attn", "proj", act, 0),
        ("proj", "add1", act, 0),
        ("add1", "ln2", act, 0),
        ("add1", "add2", act, 1),
        ("ln2", "ffn0", act, 0),
        ("ffn0", "gelu", 4 * act, 0),
        ("gelu", "ffn1", 4 * act, 0),
        ("ffn1", "add2", act, 0),
    ]
    tensors = tuple(Tensor(f"{a}->{b}", a, b, size, slot) for a, b, size, slot in edges)
    return DataflowGraph("gpt", kernels, tensors, repeat=layers, training=True)


def roofline_time(kernel: Kernel, scheme: Scheme, tp: int) -> float:
    """Forward and backward of one device's share, each operator at the slower of its FLOPs and its bytes."""
    share = sharded_operator(kernel, scheme, tp)
    ops = (share, *backward_operators(share))
    return sum(max(op.flops / PEAK_FLOPS, op.bytes / HBM) * 1e12 for op in ops)


def ring_collectives(dims: tuple[NetworkDim, ...]):  # type: ignore[no-untyped-def]
    """Collective times on rings, one phase per dimension of the group (each moving the whole tensor):
    all-reduce ``2 (n-1)/n B / bw + 2 (n-1) latency``, the others half that; a send ``B / bw + latency`` on the
    group's slowest dimension."""

    def time(kind: CollectiveKind, size: int, group: tuple[int, ...]) -> float:
        if kind == "send":
            slowest = min(group, key=lambda d: dims[d].bandwidth)
            return size / dims[slowest].bandwidth * 1e12 + dims[slowest].latency_ps
        steps = 2 if kind == "all_reduce" else 1
        total = 0.0
        for d in group:
            n = dims[d].size
            total += steps * ((n - 1) / n * size / dims[d].bandwidth * 1e12 + (n - 1) * dims[d].latency_ps)
        return total

    return time


def gpt_problem(**changes: object) -> InterChipProblem:
    """GPT layers on 8 NVLink-connected devices times 4 over a slow network, 8 micro-batches, 80 GB each."""
    dims = (NetworkDim(8, 450e9, 1_000_000), NetworkDim(4, 25e9, 5_000_000))
    fields: dict[str, object] = dict(
        graph=gpt_layer(),
        dims=dims,
        memory_bytes=80 * 10**9,
        kernel_time=roofline_time,
        collective_time=ring_collectives(dims),
        micro_batches=8,
    )
    fields.update(changes)
    return InterChipProblem(**fields)  # type: ignore[arg-type]
