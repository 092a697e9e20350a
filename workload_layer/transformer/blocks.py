"""What the blocks of a transformer compute and hold on one TP rank: the steps of a layer, of the embedding and of
the head, their parameters, and the GEMM FLOPs of a training iteration, for every option of
:mod:`stratasim.workload_layer.transformer.workload`.

A layer on a TP rank, with ``T = micro_batch * seq_len`` tokens, ``h`` hidden, ``a`` heads, ``g`` key-value
heads, ``d = h / a`` (or ``head_dim``), ``f`` the MLP's inner size and ``t`` the TP degree:

- attention: norm; QKV GEMM ``[T, h] x [h, (a + 2g) d / t]``, grouped-query attention sharing each of the ``g``
  key-value heads among ``a / g`` query heads (Megatron-core splits the ``g`` groups over TP, so ``t`` must
  divide ``g``; ``g = 1`` is multi-query attention); with rotary position embeddings, a rotation of the rank's
  queries and keys; the attention core over the ``micro_batch * a / t`` query heads: with ``attention: fused``
  (default) one causal FlashAttention kernel forward and one backward (:func:`stratasim.kernel.operators.attention`:
  no score matrix in memory, the key blocks above the diagonal skipped), with ``attention: unfused`` scores
  ``[s, d] x [d, s]`` and context ``[s, s] x [s, d]`` batched over them with a softmax between, the full square
  counted; the output projection
  ``[T, a d/t] x [a d/t, h]`` (``a d = h`` unless ``head_dim`` says otherwise); residual and the second norm;
- MLP: ``[T, h] x [h, f/t]``, GeLU, ``[T, f/t] x [f/t, h]``, residual. Gated (``activation: swiglu``, as in
  LLaMA): the up projection is ``2f/t`` wide (gate and up), SwiGLU reads both halves; three weight matrices;
- a mixture-of-experts layer (layers ``0, k, 2k...`` for ``moe_every = k``, Megatron-core's ``moe_layer_freq``)
  replaces the MLP: router GEMM ``[T_r, h] x [h, E]`` and its softmax (top-k), the dispatch all-to-all over the
  EP group, the local experts' MLPs as GEMMs batched over the ``E / ep`` local experts, each on its
  ``expert_tokens`` (:mod:`stratasim.workload_layer.transformer.moe`), the combine all-to-all and the weighted sum of each token's
  ``top_k`` expert outputs. Experts are split over TP as the dense MLP is (Megatron-core's expert tensor
  parallelism equal to ``tp``);
- Megatron's TP operators around both halves (:class:`TensorParallelSum`): all-reduce after each row-parallel
  GEMM forward, and of the input gradient before each column-parallel GEMM backward. With sequence parallelism
  (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022, section 4.2.2) they
  are :class:`SequenceParallelSum`: reduce-scatter after the row-parallel GEMMs and all-gather before the
  column-parallel ones forward, conjugate backward, and the norms and residuals between run on ``T / t`` tokens
  (dropout, not modelled, would too). In an MoE layer the all-gather and reduce-scatter sit inside the expert
  block, around the expert GEMMs, as in Megatron-core's all-to-all token dispatcher: each rank routes its own
  ``T / t`` tokens. Megatron-LM's extra all-gather of a column-parallel GEMM's input in the backward pass (to save
  memory) is not modelled;
- a parallel block (``parallel_block``, PaLM's and GPT-J's layer) runs the attention and the MLP from one norm's
  output inside one TP region: one TP operator each way per layer, and the residual adds both outputs;
- context parallelism (``cp > 1``) runs every step above on the rank's ``s / cp`` tokens (``T = micro_batch s /
  cp``) and the attention core as ring attention over the CP group (:class:`~stratasim.workload_layer.transformer.steps.RingAttention`)
  or, with ``cp_comm_type: a2a`` (DeepSpeed-Ulysses), as an all-to-all of the queries, keys and values over the CP
  group (the rank's ``T`` tokens of every local head out, the whole sequence of ``1 / cp`` of them in), the fused
  kernel over the whole sequence, and an all-to-all of its output back; or, with ``cp_comm_type: all_gather``
  (:class:`~stratasim.workload_layer.transformer.steps.GatheredAttention`), as the keys and values all-gathered
  over the CP group before one causal kernel per local chunk; or, with ``cp_comm_type: a2a+p2p``, Ulysses'
  all-to-alls within groups of ``cp_a2a`` CP ranks around ring attention across them
  (:mod:`stratasim.workload_layer.transformer.context_parallel`). A mixture of experts routes the rank's ``T`` tokens;
- selective recomputation wraps the unfused attention core in :class:`Recompute` (the fused kernel keeps only its
  row statistics and recomputes the scores in its own backward pass, so selective recomputation leaves it as it
  is); full recomputation re-runs the whole layer (``Block.recompute``).

Parameters on a TP rank: GEMM weights and column-parallel biases split over TP; row-parallel biases, norms
(layernorm: scale and shift; rmsnorm: scale only) and the router replicated over TP; ``bias: false`` (LLaMA) has
no linear biases. Expert weights are also split over EP. The first model chunk adds the word embeddings (split
over TP, the vocabulary padded to a multiple of ``t``) and learned position embeddings; the last the final norm
and the LM head's weights, unless they are the word embeddings themselves (tied embeddings and one pipeline
stage): with tied embeddings and several stages the last stage keeps a copy, as Megatron-LM does.

Pointwise FLOPs per element are estimates (norm 8, softmax 5, GeLU 8, SwiGLU 6, rotary 3, residual 1, the MoE
combine 2 per expert output); biases are fused into their GEMMs and not priced; GEMM FLOPs are exact. Each pointwise
step names the function it computes (``compute_pb2.RMSNORM`` for ``norm: rmsnorm``, ``SILU_MUL`` for ``activation:
swiglu``, ...), which a backend with a model per function prices it by.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel.elementwise_functions import ElementwiseFunction
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.transformer.config import ModelConfig, TransformerConfig
from stratasim.workload_layer.transformer.context_parallel import ulysses_ranks
from stratasim.workload_layer.transformer.memory import attention_core_bytes
from stratasim.workload_layer.transformer.moe import layer_routing
from stratasim.workload_layer.transformer.steps import (
    AllToAll,
    Attention,
    GatheredAttention,
    Gemm,
    Pointwise,
    Recompute,
    RingAttention,
    SequenceParallelSum,
    Step,
    TensorParallelSum,
)

__all__ = [
    "Parameters",
    "layer_parameters",
    "embedding_parameters",
    "head_parameters",
    "model_parameters",
    "layer_steps",
    "embedding_steps",
    "head_steps",
    "iteration_gemm_flops",
    "norm_function",
]


@dataclass(frozen=True)
class Parameters:
    """Parameters on one TP rank: ``dense`` ones replicated over the DP group, ``expert`` ones over the
    expert-data-parallel group (:mod:`stratasim.workload_layer.transformer.moe`)."""

    dense: int = 0
    expert: int = 0

    def __add__(self, other: Parameters) -> Parameters:
        return Parameters(self.dense + other.dense, self.expert + other.expert)

    @property
    def total(self) -> int:
        """Every parameter the rank holds."""
        return self.dense + self.expert


def _attention_parameters(model: ModelConfig, tp: int) -> int:
    """QKV (column-parallel, bias split) and output projection (row-parallel, bias replicated) on a TP rank."""
    h, width = model.hidden, model.qkv_width
    return (h * width + model.attention_width * h) // tp + (width // tp + h if model.bias else 0)


def _mlp_parameters(model: ModelConfig, tp: int) -> int:
    """One MLP, a dense layer's or one expert's, on a TP rank: up projection (gate and up when gated) and down."""
    h, up, f = model.hidden, model.mlp_up_width, model.ffn_size
    return (h * up + f * h) // tp + (up // tp + h if model.bias else 0)


def _norm_parameters(model: ModelConfig) -> int:
    """One norm's parameters: a layernorm's scale and shift, an rmsnorm's scale."""
    return 2 * model.hidden if model.norm == "layernorm" else model.hidden


def layer_parameters(model: ModelConfig, index: int, tp: int, ep: int) -> Parameters:
    """Parameters of layer ``index`` on a TP rank: attention and two norms (one in a parallel block), and either
    the MLP or the router (dense, replicated over TP) and the rank's ``experts / ep`` experts (``(experts + R) /
    ep`` with ``R`` redundant experts: a replica holds its expert's weights)."""
    dense = _attention_parameters(model, tp) + (1 if model.parallel_block else 2) * _norm_parameters(model)
    if not model.moe_layer(index):
        return Parameters(dense=dense + _mlp_parameters(model, tp))
    physical = model.experts + (0 if model.routing is None else model.routing.redundant_experts)
    return Parameters(dense=dense + model.hidden * model.experts, expert=physical // ep * _mlp_parameters(model, tp))


def _word_embeddings(model: ModelConfig, tp: int) -> int:
    """Word-embedding (or LM head) parameters on a TP rank: the vocabulary padded to a multiple of ``tp``."""
    return -(-model.vocab // tp) * model.hidden


def embedding_parameters(model: ModelConfig, tp: int) -> int:
    """The embedding block's parameters on a TP rank: word embeddings and learned position embeddings."""
    positions = model.seq_len * model.hidden if model.position_embedding == "learned" else 0
    return _word_embeddings(model, tp) + positions


def head_parameters(model: ModelConfig, tp: int, pp: int) -> int:
    """The head block's parameters on a TP rank: the final norm and the LM head's weights, unless those are the
    first stage's word embeddings (tied, ``pp = 1``)."""
    shared = model.tie_embeddings and pp == 1
    return _norm_parameters(model) + (0 if shared else _word_embeddings(model, tp))


def model_parameters(model: ModelConfig) -> int:
    """The model's parameters, each counted once (no TP split or vocabulary padding, tied embeddings once)."""
    layers = sum(layer_parameters(model, i, tp=1, ep=1).total for i in range(model.layers))
    return layers + embedding_parameters(model, tp=1) + head_parameters(model, tp=1, pp=1)


def _local_tokens(config: TransformerConfig) -> int:
    """Tokens of the pointwise work outside the TP region (norms, residuals): a sequence shard with sequence
    parallelism, else all of the micro-batch's."""
    plan = config.parallelism
    tokens = plan.micro_batch * config.local_seq_len
    return tokens // plan.tp if plan.sequence_parallel else tokens


def _tp_region(config: TransformerConfig, elements: int) -> tuple[Step, Step]:
    """The TP operators entering (before column-parallel GEMMs) and leaving (after row-parallel GEMMs) a TP
    region whose activations have ``elements`` elements once gathered."""
    if config.parallelism.sequence_parallel:
        return (
            SequenceParallelSum(scatter=False, elements=elements),
            SequenceParallelSum(scatter=True, elements=elements),
        )
    return TensorParallelSum(in_forward=False), TensorParallelSum(in_forward=True)


def _activation(model: ModelConfig, shape: tuple[int, ...]) -> Pointwise:
    """The MLP's non-linearity over its inner activations of ``shape``: GeLU, or SwiGLU reading gate and up."""
    if model.activation == "swiglu":
        return Pointwise("swiglu", shape, flops_per_element=6, inputs=2, function=compute_pb2.SILU_MUL)
    return Pointwise("gelu", shape, flops_per_element=8, function=compute_pb2.GELU)


def norm_function(model: ModelConfig) -> ElementwiseFunction:
    """The function of ``model``'s norms (alone or fused with a residual add): LayerNorm or RMSNorm."""
    return compute_pb2.RMSNORM if model.norm == "rmsnorm" else compute_pb2.LAYERNORM


def layer_steps(config: TransformerConfig, index: int) -> tuple[Step, ...]:
    """The forward steps of layer ``index`` on a TP rank: attention, then the MLP or the mixture of experts; or
    the parallel block."""
    if config.model.parallel_block:
        return _parallel_steps(config)
    model = config.model
    feed_forward = _moe_steps(config, index // model.moe_every) if model.moe_layer(index) else _mlp_steps(config)
    return (*_attention_steps(config), *feed_forward)


def _parallel_steps(config: TransformerConfig) -> tuple[Step, ...]:
    """PaLM's parallel block: one norm, the attention and the MLP GEMMs inside one TP region (so one TP operator
    each way), then the residual adding both outputs. The graph is a chain, so the two branches run one after the
    other, as they do on one device."""
    attention = _attention_steps(config)
    norm, enter, *inner, projection, _leave, _residual_norm = attention
    _enter, up, activation, down, leave, _residual = _mlp_steps(config)
    model = config.model
    residual = Pointwise(
        "residual", (_local_tokens(config), model.hidden), flops_per_element=2, inputs=3, function=compute_pb2.ADD
    )
    return (norm, enter, *inner, projection, up, activation, down, leave, residual)


def _context_parallel_core(config: TransformerConfig) -> tuple[Step, ...]:
    """The attention core under context parallelism (:mod:`stratasim.workload_layer.transformer.context_parallel`):
    with ``a`` Ulysses ranks, an all-to-all of the queries, keys and values over them, the core over ``1 / a`` of
    the heads (ring attention over the ``cp / a`` ranks of the ring, or one fused kernel over the whole sequence
    when the ring is one rank) and an all-to-all of its output back."""
    model, plan = config.model, config.parallelism
    s, tp, d = model.seq_len, plan.tp, model.head_size
    tokens, group = plan.micro_batch * config.local_seq_len, model.heads // model.kv_head_count
    ulysses = ulysses_ranks(plan)
    ring, heads = plan.cp // ulysses, plan.micro_batch * model.heads // tp // ulysses
    core: tuple[Step, ...]
    if ring == 1:
        core = (Attention("attention", heads, s, d, group=group),)
    else:
        kv_elements = 2 * tokens * ulysses * (model.kv_head_count // (tp * ulysses)) * d
        kind = GatheredAttention if plan.cp_comm_type == "all_gather" else RingAttention
        core = (kind("attention", heads, s // (2 * ring), d, group, ring, kv_elements),)
    if ulysses == 1:
        return core
    qkv_elements = tokens * (model.heads + 2 * model.kv_head_count) // tp * d
    out = AllToAll("attention output", tokens * model.heads // tp * d, "cp")
    return (AllToAll("attention qkv", qkv_elements, "cp"), *core, out)


def _attention_steps(config: TransformerConfig) -> tuple[Step, ...]:
    """Norm, QKV, (rotary,) attention core, projection, residual and the MLP's norm; see the module docstring."""
    model, plan = config.model, config.parallelism
    s, h, tp, d = model.seq_len, model.hidden, plan.tp, model.head_size
    tokens, local = plan.micro_batch * config.local_seq_len, _local_tokens(config)
    heads = plan.micro_batch * model.heads // tp
    enter, leave = _tp_region(config, tokens * h)
    core: tuple[Step, ...]
    if plan.cp > 1:
        core = _context_parallel_core(config)
    elif config.attention == "fused":
        fused = Attention("attention", heads, s, d, group=model.heads // model.kv_head_count)
        core = (fused,)  # selective recomputation finds nothing kept to drop
    else:
        unfused = (
            Gemm("attention scores", s, d, s, batch=heads, weights=False),
            Pointwise("softmax", (heads, s, s), flops_per_element=5, function=compute_pb2.SOFTMAX),
            Gemm("attention context", s, s, d, batch=heads, weights=False),
        )
        core = (Recompute(unfused, attention_core_bytes(config)),) if plan.recompute == "selective" else unfused
    rotary_shape = (tokens, (model.heads + model.kv_head_count) * d // tp)
    rotary = Pointwise("rotary embedding", rotary_shape, flops_per_element=3, function=compute_pb2.ROTARY)
    norm = norm_function(model)
    return (
        Pointwise(model.norm, (local, h), flops_per_element=8, function=norm),
        enter,
        Gemm("qkv", tokens, h, model.qkv_width // tp),
        *((rotary,) if model.position_embedding == "rope" else ()),
        *core,
        Gemm("attention projection", tokens, model.attention_width // tp, h),
        leave,
        Pointwise(f"residual {model.norm}", (local, h), flops_per_element=9, inputs=2, function=norm),
    )


def _mlp_steps(config: TransformerConfig) -> tuple[Step, ...]:
    """The dense MLP between its TP operators, then the residual."""
    model, plan = config.model, config.parallelism
    h, tokens, f = model.hidden, plan.micro_batch * config.local_seq_len, model.ffn_size // plan.tp
    enter, leave = _tp_region(config, tokens * h)
    return (
        enter,
        Gemm("mlp up", tokens, h, model.mlp_up_width // plan.tp),
        _activation(model, (tokens, f)),
        Gemm("mlp down", tokens, f, h),
        leave,
        Pointwise("residual", (_local_tokens(config), h), flops_per_element=1, inputs=2, function=compute_pb2.ADD),
    )


def _moe_steps(config: TransformerConfig, layer: int) -> tuple[Step, ...]:
    """Router, dispatch, the local experts, combine and the residual of the ``layer``-th MoE layer; the TP
    operators wrap the whole block without sequence parallelism and the expert GEMMs with it (see the module
    docstring)."""
    model, plan = config.model, config.parallelism
    h, f, tp = model.hidden, model.ffn_size // plan.tp, plan.tp
    r = layer_routing(config, layer)
    dispatched = r.dispatched_tokens * h
    route = (
        Gemm("router", r.routed_tokens, h, model.experts),
        Pointwise(
            "router softmax", (r.routed_tokens, model.experts), flops_per_element=5, function=compute_pb2.SOFTMAX
        ),
        AllToAll("moe dispatch", dispatched),
    )
    groups = r.groups
    inner = (groups[0][1], groups[0][0], f) if len(groups) == 1 else (1, r.slots, f)  # (experts, tokens, f)
    experts: tuple[Step, ...] = (
        *(Gemm("expert up", tokens, h, model.mlp_up_width // tp, batch=count) for tokens, count in groups),
        _activation(model, inner),
        *(Gemm("expert down", tokens, f, h, batch=count) for tokens, count in groups),
    )
    combine = (
        AllToAll("moe combine", dispatched),
        Pointwise(
            "moe combine",
            (r.routed_tokens, h),
            flops_per_element=2 * model.top_k,
            inputs=model.top_k,
            function=compute_pb2.WEIGHTED_SUM,
        ),
    )
    residual = Pointwise(
        "residual", (_local_tokens(config), h), flops_per_element=1, inputs=2, function=compute_pb2.ADD
    )
    if plan.sequence_parallel:
        enter, leave = _tp_region(config, tp * dispatched)
        return (*route, enter, *experts, leave, *combine, residual)
    enter, leave = _tp_region(config, plan.micro_batch * config.local_seq_len * h)
    return (enter, *route, *experts, *combine, leave, residual)


def embedding_steps(config: TransformerConfig) -> tuple[Step, ...]:
    """The vocabulary-parallel embedding lookup (adding learned position embeddings) and the TP operator summing
    the ranks' partial lookups (a reduce-scatter along the sequence with sequence parallelism)."""
    model, plan = config.model, config.parallelism
    tokens = plan.micro_batch * config.local_seq_len
    learned = model.position_embedding == "learned"
    lookup = Pointwise(
        "embedding",
        (tokens, model.hidden),
        flops_per_element=int(learned),
        inputs=1 + learned,
        function=compute_pb2.EMBEDDING,
    )
    return lookup, _tp_region(config, tokens * model.hidden)[1]


def head_steps(config: TransformerConfig) -> tuple[Step, ...]:
    """The final norm, the TP operator entering the vocabulary-parallel LM head, its GEMM and the loss."""
    model, plan = config.model, config.parallelism
    tokens, vocab = plan.micro_batch * config.local_seq_len, -(-model.vocab // plan.tp)
    return (
        Pointwise(
            f"final {model.norm}",
            (_local_tokens(config), model.hidden),
            flops_per_element=8,
            function=norm_function(model),
        ),
        _tp_region(config, tokens * model.hidden)[0],
        Gemm("lm head", tokens, model.hidden, vocab),
        Pointwise("loss", (tokens, vocab), flops_per_element=5, function=compute_pb2.CROSS_ENTROPY),
    )


def iteration_gemm_flops(config: TransformerConfig) -> int:
    """The GEMM FLOPs one training iteration's graphs run, summed over every NPU (see
    :meth:`stratasim.workload_layer.transformer.workload.TransformerWorkload.model_flops_per_iteration` for what that includes).

    Per micro-batch of ``T`` tokens and model replica, a layer's forward GEMMs take ``2 T h (a + 2g) d`` (QKV),
    ``4 b s^2 a d`` (attention core), ``2 T a d h`` (projection; ``a d`` is ``h`` unless ``head_dim`` says
    otherwise) and ``2 T h (u + f)`` (MLP, ``u`` the up projection's width, ``f`` or ``2f``), or for an MoE layer ``2 T_r h E t`` (the router, on every TP rank) and
    ``2 E C g h (u + f)`` (the experts' ``E C g`` token slots, :mod:`stratasim.workload_layer.transformer.moe`),
    routed per CP rank (times ``cp``). Backward passes double
    them; full recomputation runs the layers forward once more, selective recomputation the unfused attention
    core; the LM head adds ``3 * 2 T h V'`` (``V'`` the padded vocabulary). Times ``micro_batches * dp``. A fused
    attention core is counted as the unfused one, ``4 b s^2 a d`` forward (the full square, as Megatron-LM counts it,
    though the causal kernel skips the blocks above the diagonal) and twice that backward (not the scores its
    backward kernel recomputes), and selective recomputation adds nothing to it.
    """
    model, plan = config.model, config.parallelism
    h, s, b = model.hidden, model.seq_len, plan.micro_batch
    tokens = b * s
    width = model.attention_width
    core = 4 * b * s * s * width
    attention = 2 * tokens * h * model.qkv_width + core + 2 * tokens * width * h
    mlp = 2 * tokens * h * (model.mlp_up_width + model.ffn_size)
    moe_layers = sum(model.moe_layer(i) for i in range(model.layers))
    moe = 0
    for layer in range(moe_layers):
        r = layer_routing(config, layer)
        router = 2 * r.routed_tokens * h * model.experts * plan.tp
        moe += plan.cp * (router + 2 * r.slots * h * (model.mlp_up_width + model.ffn_size))
    layers = model.layers * attention + (model.layers - moe_layers) * mlp + moe
    passes = 4 if plan.recompute == "full" else 3
    recomputed_core = model.layers * core if plan.recompute == "selective" and config.attention == "unfused" else 0
    head = 3 * 2 * tokens * h * -(-model.vocab // plan.tp) * plan.tp
    micro_batches = plan.batch // (plan.micro_batch * plan.dp)
    return micro_batches * plan.dp * (passes * layers + recomputed_core + head)
