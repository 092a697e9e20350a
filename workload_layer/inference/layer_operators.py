"""The operators of a decoder's layer, embedding and head on one TP rank, for any batch of new tokens.

Shared by the batch inference workload (:mod:`stratasim.workload_layer.inference.workload`, whose module docstring
states each operator's shape and FLOPs) and the request-level serving workload
(:mod:`stratasim.workload_layer.serving`), which prices iterations mixing prefill chunks and decode steps: the
GEMMs, norms and TP collectives run over every new token of the iteration at once, the attention core once per
group of sequences sharing a shape (:meth:`DecoderOperators.attention_core`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import ceil

from stratasim.kernel import operators
from stratasim.kernel.elementwise_functions import ElementwiseFunction
from stratasim.kernel.serving import Compute, Step, TensorParallelCollective
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.transformer.blocks import norm_function
from stratasim.workload_layer.transformer.config import AttentionKernel, ModelConfig

__all__ = ["DecoderOperators"]


@dataclass(frozen=True)
class DecoderOperators:
    """Builds the operators of ``model`` on one rank of a ``tp``-way tensor-parallel group, in ``dtype``."""

    model: ModelConfig
    tp: int
    dtype: compute_pb2.DType.ValueType
    attention: AttentionKernel = "fused"

    @property
    def element_bytes(self) -> int:
        """Bytes of one element of ``dtype``."""
        return operators.dtype_bytes(self.dtype)

    def layer(
        self, tokens: int, core: tuple[Compute, ...], feed_forward: tuple[Compute, ...] | None = None
    ) -> tuple[Compute | TensorParallelCollective, ...]:
        """A layer's operations over ``tokens`` new tokens with the attention ``core`` (:meth:`attention_core`)
        and the dense MLP, or ``feed_forward`` in its place (:meth:`moe`), named within the layer; a parallel
        block (``model.parallel_block``) has one norm and one TP all-reduce."""
        model, tp = self.model, self.tp
        h, d = model.hidden, model.head_size
        a, g = model.heads // tp, model.kv_head_count // tp
        kv_elements = 2 * tokens * g * d
        mlp = self._mlp(tokens) if feed_forward is None else feed_forward
        norm = norm_function(model)
        attention = (
            Compute("layernorm", self._pointwise("layernorm", (tokens, h), flops=8, function=norm)),
            Compute("qkv", self._gemm("qkv", tokens, h, (a + 2 * g) * d)),
            Compute(
                "kv append",
                self._pointwise("kv append", (2, tokens, g * d), flops=0, function=compute_pb2.COPY),
                memory_bytes=kv_elements * self.element_bytes,
            ),
            *core,
            Compute("attention projection", self._gemm("attention projection", tokens, a * d, h)),
        )
        if model.parallel_block:  # PaLM's: one norm, attention and MLP summed under one all-reduce
            return (
                *attention,
                *mlp,
                self.all_reduce("tp all-reduce", tokens),
                Compute(
                    "residual", self._pointwise("residual", (tokens, h), flops=2, inputs=3, function=compute_pb2.ADD)
                ),
            )
        return (
            *attention,
            self.all_reduce("attention tp all-reduce", tokens),
            Compute(
                "residual layernorm",
                self._pointwise("residual layernorm", (tokens, h), flops=9, inputs=2, function=norm),
            ),
            *mlp,
            self.all_reduce("mlp tp all-reduce", tokens),
            Compute("residual", self._pointwise("residual", (tokens, h), flops=1, inputs=2, function=compute_pb2.ADD)),
        )

    def _mlp(self, tokens: int) -> tuple[Compute, ...]:
        """The dense MLP: up (gate and up when gated), activation, down."""
        model, f = self.model, self.model.ffn_size // self.tp
        up = 2 * f if model.activation == "swiglu" else f
        return (
            Compute("mlp up", self._gemm("mlp up", tokens, model.hidden, up)),
            Compute("activation", self._activation(tokens, f)),
            Compute("mlp down", self._gemm("mlp down", tokens, f, model.hidden)),
        )

    def moe(self, tokens: int, with_experts: bool = True) -> tuple[Compute, ...]:
        """A mixture of experts in place of the MLP: the router GEMM and its softmax, then the experts
        (:meth:`experts`: every expert on this rank, split over TP, on the ``tokens`` routed here), and the weighted
        sum of each token's ``top_k`` outputs. Without ``with_experts`` the experts are left out: under expert
        parallelism they run on the tokens of a whole group (:mod:`stratasim.workload_layer.serving.workload`)."""
        model, h = self.model, self.model.hidden
        return (
            Compute("router", self._gemm("router", tokens, h, model.experts)),
            Compute(
                "router softmax",
                self._pointwise("router softmax", (tokens, model.experts), flops=5, function=compute_pb2.SOFTMAX),
            ),
            *(self.experts(tokens, model.experts) if with_experts else ()),
            Compute(
                "expert combine",
                self._pointwise(
                    "expert combine",
                    (tokens, h),
                    flops=2 * model.top_k,
                    inputs=model.top_k,
                    function=compute_pb2.WEIGHTED_SUM,
                ),
            ),
        )

    def experts(self, tokens: int, local: int) -> tuple[Compute, ...]:
        """The MLPs of ``local`` experts on this rank, each split over TP, when ``tokens`` tokens are routed evenly
        over all the model's experts: each takes its even share, ``ceil(top_k tokens / experts)`` (no capacity
        drops: a server routes every token)."""
        model = self.model
        return self.expert_mlps((ceil(model.top_k * tokens / model.experts),) * local)

    def expert_mlps(self, tokens: tuple[int, ...]) -> tuple[Compute, ...]:
        """The MLPs of this rank's experts, each split over TP, the ``i``-th on ``tokens[i]`` tokens: as GEMMs
        batched over the experts taking equal tokens (one batch when routing is even, a grouped GEMM's groups
        otherwise, the busiest first), the activation over all their tokens."""
        model, f = self.model, self.model.ffn_size // self.tp
        up = 2 * f if model.activation == "swiglu" else f
        groups = sorted(Counter(count for count in tokens if count).items(), reverse=True)
        return (
            *(Compute("expert up", self._gemm("expert up", m, model.hidden, up, batch=n)) for m, n in groups),
            Compute("expert activation", self._activation(sum(m * n for m, n in groups), f)),
            *(Compute("expert down", self._gemm("expert down", m, f, model.hidden, batch=n)) for m, n in groups),
        )

    def attention_core(self, requests: int, queries: int, context: int) -> tuple[Compute, ...]:
        """Scores, softmax and context of ``requests`` requests, each with ``queries`` new tokens attending to
        ``context`` keys (the new ones last): one fused causal kernel, or (unfused) two GEMMs batched over the
        key-value heads, each stacking its query heads, with the softmax between."""
        model, tp, b = self.model, self.tp, requests
        d, a, g = model.head_size, model.heads // tp, model.kv_head_count // tp
        r = a // g
        if self.attention == "fused":
            fused = operators.attention(
                b * a, queries, context, d, causal=True, group=r, dtype=self.dtype, name="attention"
            )
            return (Compute("attention", fused),)
        return (
            Compute("attention scores", self._gemm("attention scores", r * queries, d, context, batch=b * g)),
            Compute(
                "softmax", self._pointwise("softmax", (b * a, queries, context), flops=5, function=compute_pb2.SOFTMAX)
            ),
            Compute("attention context", self._gemm("attention context", r * queries, context, d, batch=b * g)),
        )

    def embedding(self, tokens: int) -> list[Step]:
        """The embedding lookup of ``tokens`` tokens and its vocabulary-parallel TP all-reduce."""
        return [
            Compute(
                "embedding",
                self._pointwise("embedding", (tokens, self.model.hidden), flops=0, function=compute_pb2.EMBEDDING),
            ),
            self.all_reduce("embedding tp all-reduce", tokens),
        ]

    def head(self, sequences: int) -> list[Step]:
        """Final layernorm, LM head over the last position of ``sequences`` sequences, logits all-gather and the
        sampler."""
        model, tp, b = self.model, self.tp, sequences
        vocab_shard = -(-model.vocab // tp)
        return [
            Compute(
                "final layernorm",
                self._pointwise("final layernorm", (b, model.hidden), flops=8, function=norm_function(model)),
            ),
            Compute("lm head", self._gemm("lm head", b, model.hidden, vocab_shard)),
            TensorParallelCollective(
                "logits tp all-gather", workload_pb2.ALL_GATHER, b * vocab_shard * tp * self.element_bytes
            ),
            Compute("sample", self._pointwise("sample", (b, vocab_shard * tp), flops=5, function=compute_pb2.SAMPLE)),
        ]

    def all_reduce(self, name: str, tokens: int) -> TensorParallelCollective:
        """A TP all-reduce of ``tokens`` hidden vectors."""
        size = tokens * self.model.hidden * self.element_bytes
        return TensorParallelCollective(name, workload_pb2.ALL_REDUCE, size)

    def _activation(self, tokens: int, width: int) -> compute_pb2.OperatorDesc:
        """GeLU of the up projection, or SwiGLU: SiLU of the gate half times the up half."""
        if self.model.activation == "swiglu":
            return self._pointwise("swiglu", (tokens, width), flops=5, inputs=2, function=compute_pb2.SILU_MUL)
        return self._pointwise("gelu", (tokens, width), flops=8, function=compute_pb2.GELU)

    def _gemm(self, name: str, m: int, k: int, n: int, batch: int = 1) -> compute_pb2.OperatorDesc:
        return operators.gemm(m, k, n, dtype=self.dtype, batch=batch, name=name)

    def _pointwise(
        self, name: str, shape: tuple[int, ...], flops: int, inputs: int = 1, *, function: ElementwiseFunction
    ) -> compute_pb2.OperatorDesc:
        return operators.elementwise(
            shape, dtype=self.dtype, flops_per_element=flops, inputs=inputs, name=name, function=function
        )
