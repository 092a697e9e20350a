"""One transformer layer as a dataflow graph (DFModel's Fig. 2A), built from the transformer builder's own steps.

The kernels are the steps :func:`~stratasim.workload_layer.transformer.blocks.layer_steps` emits for one device
(``tp = 1``) and one micro-batch, with the operators
:func:`~stratasim.workload_layer.transformer.step_operators.step_operator` gives them: exactly what the event
engine prices. For a GPT layer: layernorm, QKV GEMM, fused attention, projection GEMM, residual add fused with the
second layernorm, the MLP's up GEMM, GeLU, down GEMM and residual add (rotary embeddings, an unfused attention core,
SwiGLU or PaLM's parallel block as the model says; the builder models no dropout, so neither does the graph).
Megatron's tensor-parallel operators are not kernels: they are what the mapper's layout conversions cost.

Linear GEMMs offer the weight-GEMM schemes (column-, row-parallel, rows, replicated) and hold their weights and
biases; the attention core splits its heads; the pointwise kernels inside a tensor-parallel region (rotary,
softmax, the activation) split as their neighbours do. Norms and residual adds are replicated, or also split by
tokens (``split_S0``) when the plan has sequence parallelism, as Megatron runs them. The graph repeats once per
layer; the layer's input (the residual stream) arrives from outside, so the first norm's and the residual adds'
stream inputs are left unfilled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from stratasim.kernel import operators
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.dataflow.generators._arguments import argument_error, flag, positive
from stratasim.workload_layer.dataflow.graph import DataflowGraph, Kernel, Scheme, Tensor
from stratasim.workload_layer.dataflow.schemes import attention_schemes, elementwise_schemes, gemm_schemes
from stratasim.workload_layer.transformer.blocks import layer_steps, norm_function
from stratasim.workload_layer.transformer.config import ModelConfig, ParallelismConfig, TransformerConfig
from stratasim.workload_layer.transformer.step_operators import step_operator
from stratasim.workload_layer.transformer.steps import Attention, Gemm, Pointwise

__all__ = ["gpt_layer_graph", "gpt3_1t_config", "gpt3_1t", "GPT3_1T"]

_GENERATOR = "gpt_layer_graph"

GPT3_1T = ModelConfig(layers=128, hidden=25600, heads=160, seq_len=2048, vocab=51200)
"""The 1T-parameter GPT-3-style model of DFModel's Sec. VI.C and Calculon's ``megatron-1T``: 128 layers, hidden
25600, 160 heads of 160, FFN 102400, sequence 2048 (Megatron-LM's vocabulary of 51200)."""

_OPERAND_PRODUCTS = ("attention scores", "attention context")
"""The unfused attention core's GEMMs: both operands are activations, so they hold no weights."""


def gpt3_1t_config(micro_batch: int = 1) -> TransformerConfig:
    """The workload of :data:`GPT3_1T` on one device, ``micro_batch`` sequences at a time, in bf16."""
    plan = ParallelismConfig(micro_batch=positive("gpt3_1t_config", "micro_batch", micro_batch))
    return TransformerConfig(model=GPT3_1T, parallelism=plan)


def gpt3_1t(training: bool = True, micro_batch: int = 1) -> DataflowGraph:
    """A layer of :data:`GPT3_1T` repeated 128 times: :func:`gpt_layer_graph` of :func:`gpt3_1t_config`."""
    return gpt_layer_graph(gpt3_1t_config(micro_batch), training)


def gpt_layer_graph(config: TransformerConfig, training: bool = True) -> DataflowGraph:
    """The layer of ``config``'s model as a dataflow graph of one micro-batch, repeated ``model.layers`` times,
    with its backward pass when ``training``.

    ``config``'s plan contributes its micro-batch and whether norms may split by tokens (sequence parallelism);
    the mapper chooses the rest. Dense models only: a mixture of experts is refused.
    """
    if not isinstance(config, TransformerConfig):
        raise argument_error(_GENERATOR, "config", f"must be a TransformerConfig, not {type(config).__name__}")
    flag(_GENERATOR, "training", training)
    if config.model.experts:
        raise argument_error(_GENERATOR, "config", "model.experts: a mixture of experts has no dataflow graph yet")
    single = config.model_copy(update={"parallelism": ParallelismConfig(micro_batch=config.parallelism.micro_batch)})
    wiring = _Wiring(config)
    for step in layer_steps(single, 0):
        if isinstance(step, (Gemm, Pointwise, Attention)):
            wiring.add(step)
    return DataflowGraph("gpt layer", tuple(wiring.kernels), tuple(wiring.tensors), config.model.layers, training)


@dataclass
class _Wiring:
    """The kernels and tensors of a layer as its steps arrive in order: each step reads the previous one's output,
    residual adds also read the residual stream, and the attention core's and gated activation's operands come
    from the QKV and up projections."""

    config: TransformerConfig
    kernels: list[Kernel] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)
    outputs: dict[str, int] = field(default_factory=dict)
    stream: str | None = None

    @property
    def size(self) -> int:
        """Bytes of one value in the model's precision."""
        return operators.dtype_bytes(operators.parse_dtype(self.config.precision))

    def add(self, step: Gemm | Pointwise | Attention) -> None:
        """Append ``step``'s kernel and the tensors it reads."""
        previous = self.kernels[-1].name if self.kernels else None
        self.kernels.append(self._kernel(step))
        self.outputs[step.name] = _output_elements(step) * self.size
        for slot, (source, elements) in enumerate(self._sources(step, previous)):
            if source is not None:
                name = f"{source} -> {step.name}" + (f" [{slot}]" if slot else "")
                self.tensors.append(Tensor(name, source, step.name, elements or self.outputs[source], slot))
        if isinstance(step, Pointwise) and step.name.startswith("residual"):
            self.stream = step.name

    def _sources(self, step: Gemm | Pointwise | Attention, previous: str | None) -> list[tuple[str | None, int]]:
        """The producer of each input slot (None: from outside the layer) and the bytes it passes (0: its whole
        output)."""
        model, size = self.config.model, self.size
        tokens, d = self.config.parallelism.micro_batch * model.seq_len, model.head_size
        if previous is None:
            return [(None, 0)]
        if step.name == "attention scores":
            qk = "rotary embedding" if "rotary embedding" in self.outputs else "qkv"
            return [(qk, tokens * model.heads * d * size), (qk, tokens * model.kv_head_count * d * size)]
        if step.name == "attention context":
            return [(previous, 0), ("qkv", tokens * model.kv_head_count * d * size)]
        if step.name == "attention" and previous == "rotary embedding":
            return [(previous, self.outputs["qkv"])]  # the values ride with the rotated queries and keys
        if step.name == "mlp up" and model.parallel_block:
            return [(self.kernels[0].name, 0)]
        if isinstance(step, Pointwise) and step.function == compute_pb2.SILU_MUL:
            return [(previous, self.outputs[previous] // 2)] * 2  # gate and up halves
        if isinstance(step, Pointwise) and step.name.startswith("residual"):
            branches = ["attention projection"] if step.inputs == 3 else []
            return [(name, 0) for name in (*branches, previous)] + [(self.stream, 0)]
        return [(previous, 0)]

    def _kernel(self, step: Gemm | Pointwise | Attention) -> Kernel:
        config, model = self.config, self.config.model
        dtype = operators.parse_dtype(config.precision)
        gemm_dtype = None if config.gemm_precision is None else operators.parse_dtype(config.gemm_precision)
        op = step_operator(step, "forward", dtype, gemm_dtype)
        if isinstance(step, Attention):
            return Kernel(step.name, op, attention_schemes())
        if isinstance(step, Gemm):
            if step.name in _OPERAND_PRODUCTS:
                return Kernel(step.name, op, gemm_schemes(weights=False))
            weights = (step.k * step.n + (step.n if model.bias else 0)) * self.size
            return Kernel(step.name, op, gemm_schemes(weights=True), weight_bytes=weights)
        return Kernel(step.name, op, self._pointwise_schemes(step), weight_bytes=self._norm_weights(step))

    def _pointwise_schemes(self, step: Pointwise) -> tuple[Scheme, ...]:
        """Every element-wise split inside a tensor-parallel region; outside it (norms, residual adds) replicated,
        or also split by tokens under sequence parallelism."""
        schemes = elementwise_schemes(step.inputs)
        if step.function not in (norm_function(self.config.model), compute_pb2.ADD):
            return schemes
        allowed = ("replicate", "split_S0") if self.config.parallelism.sequence_parallel else ("replicate",)
        return tuple(s for s in schemes if s.name in allowed)

    def _norm_weights(self, step: Pointwise) -> int:
        """A norm's scale (and a layernorm's shift); nothing for other pointwise steps."""
        model = self.config.model
        if step.function != norm_function(model):
            return 0
        return (2 if model.norm == "layernorm" else 1) * model.hidden * self.size


def _output_elements(step: Gemm | Pointwise | Attention) -> int:
    """Elements ``step`` writes: a GEMM's ``batch x m x n``, a pointwise step's shape, attention's context."""
    if isinstance(step, Gemm):
        return step.batch * step.m * step.n
    if isinstance(step, Pointwise):
        return prod(step.shape)
    return step.batch * step.seq * step.head_dim
