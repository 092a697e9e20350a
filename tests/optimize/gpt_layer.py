"""A GPT layer's forward pass as a dataflow graph, as DFModel draws it (Fig. 2A, its generator's kernels), with
Megatron's sharding and the all-reduce each chip waits for: the test's own, not the workload's generator.

Kernels: the layer input, LayerNorm, Q, K, V, the two attention products around an unfused softmax, the output
projection, the residual add, LayerNorm, the two feed-forward GEMMs around GeLU, the residual add. Megatron's
schemes split Q, K, V and FFN0 by columns, the attention products by heads and Proj and FFN1 by rows (partial
sums), whose outputs each chip all-reduces over a ring of ``tp`` before the replicated adds.
"""

from __future__ import annotations

from stratasim.kernel import operators
from stratasim.optimize.chip_workload import ChipWorkload, chip_workload
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Tensor
from stratasim.workload_layer.dataflow.schemes import elementwise_schemes, gemm_schemes

GPT3_175B = {"hidden": 12288, "heads": 96, "seq": 2048, "layers": 96}
PCIE = 25e9  # bytes/s between chips (DFModel Sec. VII)
WORD = 2  # bf16

SCHEMES = {
    "input": "replicate",
    "ln1": "replicate",
    "q": "n",
    "k": "n",
    "v": "n",
    "mha1": "batch",
    "softmax": "split_S1",
    "mha2": "batch",
    "proj": "k",
    "add1": "replicate",
    "ln2": "replicate",
    "ffn0": "n",
    "gelu": "split_S1",
    "ffn1": "k",
    "add2": "replicate",
}

VENDOR = (
    ("input", "ln1", "q", "k", "v"),
    ("mha1", "softmax", "mha2", "proj", "add1"),
    ("ln2", "ffn0", "gelu"),
    ("ffn1", "add2"),
)
"""SambaNova's mapping of a layer (DFModel Sec. VII.B: {Q,K,V}, {MHA1,Softmax,MHA2,Proj}, {FFN0}, {FFN1,Add}),
each element-wise kernel joining the partition of its neighbours."""


def _gemm(name: str, m: int, k: int, n: int, weights: bool, batch: int = 1) -> Kernel:
    op = operators.gemm(m, k, n, batch=batch, name=name)
    return Kernel(name, op, gemm_schemes(weights), weight_bytes=k * n * WORD if weights else 0)


def _elementwise(name: str, shape: list[int], inputs: int = 1) -> Kernel:
    return Kernel(name, operators.elementwise(shape, inputs=inputs, name=name), elementwise_schemes(inputs))


def gpt_layer(hidden: int, heads: int, seq: int, layers: int = 1) -> DataflowGraph:
    """One layer of a GPT of this size on one sequence, run ``layers`` times."""
    head = hidden // heads
    kernels = (
        _elementwise("input", [seq, hidden]),
        _elementwise("ln1", [seq, hidden]),
        _gemm("q", seq, hidden, hidden, True),
        _gemm("k", seq, hidden, hidden, True),
        _gemm("v", seq, hidden, hidden, True),
        _gemm("mha1", seq, head, seq, False, batch=heads),
        _elementwise("softmax", [seq, heads * seq]),
        _gemm("mha2", seq, seq, head, False, batch=heads),
        _gemm("proj", seq, hidden, hidden, True),
        _elementwise("add1", [seq, hidden], inputs=2),
        _elementwise("ln2", [seq, hidden]),
        _gemm("ffn0", seq, hidden, 4 * hidden, True),
        _elementwise("gelu", [seq, 4 * hidden]),
        _gemm("ffn1", seq, 4 * hidden, hidden, True),
        _elementwise("add2", [seq, hidden], inputs=2),
    )
    act, scores, wide = seq * hidden * WORD, heads * seq * seq * WORD, 4 * seq * hidden * WORD
    edges = (
        ("input", "ln1", act, 0),
        ("ln1", "q", act, 0),
        ("ln1", "k", act, 0),
        ("ln1", "v", act, 0),
        ("q", "mha1", act, 0),
        ("k", "mha1", act, 1),
        ("mha1", "softmax", scores, 0),
        ("softmax", "mha2", scores, 0),
        ("v", "mha2", act, 1),
        ("mha2", "proj", act, 0),
        ("proj", "add1", act, 0),
        ("input", "add1", act, 1),
        ("add1", "ln2", act, 0),
        ("ln2", "ffn0", act, 0),
        ("ffn0", "gelu", wide, 0),
        ("gelu", "ffn1", wide, 0),
        ("ffn1", "add2", act, 0),
        ("add1", "add2", act, 1),
    )
    tensors = tuple(Tensor(f"{a}->{b}", a, b, size, slot) for a, b, size, slot in edges)
    return DataflowGraph("gpt_layer", kernels, tensors, repeat=layers)


def ring_all_reduce_s(bytes_: int, chips: int, bandwidth: float) -> float:
    """A ring all-reduce's time: 2 (n - 1) / n of the tensor over each link."""
    return 2 * (chips - 1) / chips * bytes_ / bandwidth if chips > 1 else 0.0


def gpt_chip_work(
    tp: int, pp: int = 1, link: float = PCIE, size: dict[str, int] = GPT3_175B, training: bool = False
) -> ChipWorkload:
    """What one chip of a ``tp`` x ``pp`` GPT plan runs: its ``layers / pp`` layers, Megatron-sharded over
    ``tp`` chips on a ring of ``link`` bytes/s (in training, the backward all-reduces too)."""
    layer = gpt_layer(size["hidden"], size["heads"], size["seq"])
    graph = DataflowGraph(layer.name, layer.kernels, layer.tensors, size["layers"] // pp, training)
    reduce = ring_all_reduce_s(size["seq"] * size["hidden"] * WORD, tp, link)
    backward = {"q.dgrad": reduce, "ffn0.dgrad": reduce} if training else {}
    return chip_workload(graph, schemes=SCHEMES, tp=tp, network_seconds={"proj": reduce, "ffn1": reduce} | backward)


def layer_flops(size: dict[str, int] = GPT3_175B) -> int:
    """The FLOPs of one layer's forward pass on the whole group (the GEMMs)."""
    graph = gpt_layer(size["hidden"], size["heads"], size["seq"])
    return sum(k.flops for k in graph.kernels if k.operator.WhichOneof("shape") == "gemm")
