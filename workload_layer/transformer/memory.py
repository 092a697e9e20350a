"""Peak memory of one NPU training a Megatron-style transformer (:mod:`stratasim.workload_layer.transformer.workload`).

For an NPU of pipeline stage ``p`` (any TP or DP rank; all ranks of a stage hold the same amount), in bytes:

- ``weights = P * e`` and ``gradients = P * e``, with ``P`` the parameters one TP rank of the stage holds
  (:meth:`TransformerWorkload.stage_parameters`, so the embeddings on the first stage and the final layernorm and
  tied LM head on the last are included) and ``e`` the bytes of ``precision``;
- ``optimizer = 12 * P``: Adam in mixed precision keeps an fp32 master copy, momentum and variance of every
  parameter, 4 + 4 + 4 bytes (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", SC'20, section 3.1: ``K = 12``);
- with ZeRO (same paper, section 5 and figure 1) over the ``N_d = dp`` ranks of the DP group, each rank keeps
  only its shard, ``ceil(P / N_d)``, of the optimizer states (stage 1), also of the gradients (stage 2) and also
  of the weights (stage 3): with 16-bit weights and gradients, the paper's ``(2 + 2) Psi + K Psi / N_d``,
  ``2 Psi + (2 + K) Psi / N_d`` and ``(2 + 2 + K) Psi / N_d`` bytes for ``Psi = P``. A mixture of experts'
  expert parameters are sharded over their own expert-data-parallel group of ``dp / ep`` ranks
  (:mod:`stratasim.workload_layer.transformer.moe`). The parameters ZeRO-3 gathers for the block running (a temporary buffer) are not
  counted;
- ``activations``, with ``s`` the sequence length, ``b`` the micro-batch, ``h`` hidden, ``a`` heads, ``t`` the TP
  degree, ``v`` the model chunks per stage (``virtual_stages``), ``L_c = layers / (pp v)`` the layers of one
  chunk (the stage's ``stage_layers`` count over ``v`` when listed) and ``n_p`` the (chunk, micro-batch) forward passes whose activations the stage holds at once:

  - one layer and micro-batch stores, on a TP rank, ``A`` bytes from Korthikanti et al.'s analysis ("Reducing
    Activation Recomputation in Large Transformer Models", arXiv:2205.05198, 2022, section 4 and table 2; 16-bit
    activations, 1-byte dropout masks) in three parts (:class:`ActivationTerms`): ``10 s b h`` replicated over TP
    (the norms' inputs, the QKV GEMM's and the MLP's inputs, two dropout masks), ``24 s b h`` split over TP
    (queries, keys, values, the projection's input, the MLP's inner activations) and the attention core's
    ``5 a s^2 b`` split over TP. So ``A = s b h (10 + 24/t + 5 a s / (h t))`` with TP (their eq. 2; ``t = 1``
    gives eq. 1's ``s b h (34 + 5 a s / h)``), ``s b h (34/t + 5 a s / (h t))`` with sequence parallelism (eq. 4:
    it splits the replicated part along the sequence), and without the ``5 a s^2 b / t`` term with selective
    recomputation: ``s b h (10 + 24/t)``, or ``34 s b h / t`` with sequence parallelism (table 2; their eq. 6 is
    that times the layers). The ``24 s b h`` generalise to ``4 s b h + 4 s b g d`` for ``g`` key-value heads of
    size ``d`` and ``2 s b (u + f)`` for an MLP of inner size ``f`` whose up projection is ``u`` wide (GeLU:
    ``u = f = 4h`` gives ``16 s b h``; SwiGLU ``u = 2f``). An MoE layer keeps instead of the MLP's inner part its
    router probabilities ``2 s b E`` (replicated like the MLP's input) and, per rank, its ``n`` dispatched token
    slots, ``2 n h``, and their expert activations, ``2 n (u + f) / t`` (``n = E C`` or ``t E C`` with sequence
    parallelism, :mod:`stratasim.workload_layer.transformer.moe`; under skewed routing the busiest rank's slots
    of the fullest layer);
  - without recomputation: ``A * L_c * n_p``;
  - with full recomputation only each layer's input is kept, ``2 s b h`` bytes (replicated over TP, or split
    along the sequence with sequence parallelism), plus one layer's full activations while its backward pass
    runs: ``2 s b h * L_c * n_p + A``;
  - with selective recomputation the attention core's ``5 a s^2 b / t`` is not kept but recomputed, for one layer
    at a time, while its backward pass runs: ``(A - 5 a s^2 b / t) * L_c * n_p + 5 a s^2 b / t``;
  - with ``attention: fused`` (FlashAttention, the default) the attention core keeps no score matrix, softmax
    output or dropout mask, only the fp32 log-sum-exp of each query's scores: ``4 a s b / t`` bytes in place of
    ``5 a s^2 b / t``, whatever the recomputation (selective recomputation then has nothing to drop: it is
    recomputation ``none``, and Korthikanti et al.'s table 2 row for it, ``s b h (10 + 24/t)``, is the fused
    figure without the statistics);
  - with layers of both kinds (dense and MoE), the chunk of the stage keeping the most, times ``n_p``, plus the
    largest recomputed part;
  - ``n_p`` follows from the order of :func:`stratasim.workload_layer.transformer.pipeline_schedule.pipeline_order`, ``W`` warm-up
    forward passes then one forward and one backward pass alternately, so the stage holds ``min(W + 1, v m)``
    passes at most, with ``m`` the micro-batches per iteration: ``n_p = m`` for GPipe (every forward pass
    precedes every backward pass), ``min(pp - p, m)`` for 1F1B (``W = pp - p - 1``) and, for the interleaved
    schedule, ``v m`` when ``m = pp`` (Megatron then runs every forward pass first) and otherwise
    ``min(2 (pp - p - 1) + (v - 1) pp + 1, v m)``. On the first stage with ``m > pp`` that is ``(v + 1) pp - 1``
    chunks, i.e. ``pp + (pp - 1) / v`` micro-batches' worth of the stage's layers: Korthikanti et al.'s
    ``pp (1 + (pp - 1) / (pp v))`` for the interleaved schedule, exactly.
  - the zero-bubble and DualPipe schedules (``zb_h1``, ``zb_h2``, ``zb_v``, ``dualpipe``, ``dualpipev``) split backward passes: the input
    pass frees all of a layer's activations but what its weight pass reads, each weighted GEMM's input and output
    gradient (:func:`weight_pass_bytes`, at most what the layer keeps), which the weight pass frees; the peak is
    found by walking the schedule's order (:func:`split_schedule_peak`), its chunks placed as the schedule says
    (ZB-V's and DualPipeV's V, DualPipe's two copies). With full recomputation the input pass first re-runs the
    layer's forward pass (its ``A`` held, one layer at a time, as for any schedule) and what the weight pass reads
    is counted from the recomputed ``A``, not the kept input: the walk (at pass ends, plus one layer's ``A``)
    bounds the timeline's peak by at most one layer's weight-pass bytes less its input.

The graphs carry the same figures along the timeline (:class:`stratasim.workload_layer.transformer.steps.Block`): each
layer's forward pass allocates :attr:`LayerActivations.kept_bytes` at its first node and its backward pass frees it
at its last; recomputation allocates :attr:`LayerActivations.recomputed_bytes` around the layer's recomputation and
backward pass (selective recomputation around the attention core's). The running sum peaks at the ``activations``
above.

With context parallelism every ``s`` above is a CP rank's ``s / cp`` tokens (the fused core's statistics too), so
the activations are divided by ``cp``; ZeRO shards over the combined DP x CP group (``N_d = dp cp``), and with HSDP
(``hsdp > 1``, ZeRO-3) over the shard group, ``N_d = hsdp cp``.

Not modelled: activations of the embedding and LM head (logits, loss), the activation precision (always the
16-bit formula), temporary buffers, communication buffers, fragmentation and the framework's own footprint.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel import operators
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.moe import layer_routing
from stratasim.workload_layer.transformer.pipeline_schedule import Pass, chunk_positions, pipeline_order, placement
from stratasim.workload_layer.transformer.steps import Gemm, Step
from stratasim.workload_layer.transformer.zero_bubble import PassTimes

__all__ = [
    "StageMemory",
    "ActivationTerms",
    "LayerActivations",
    "OPTIMIZER_BYTES_PER_PARAMETER",
    "layer_activation_bytes",
    "layer_terms",
    "layer_activations",
    "attention_core_bytes",
    "micro_batches_in_flight",
    "weight_pass_bytes",
    "split_schedule_peak",
    "stage_memory",
]

SPLIT_SCHEDULES = ("zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipev")
"""The schedules that run backward passes in halves; their activations peak where :func:`split_schedule_peak`
says."""

OPTIMIZER_BYTES_PER_PARAMETER = 12
"""Mixed-precision Adam: fp32 master weight, momentum and variance (ZeRO's ``K = 12``)."""


@dataclass(frozen=True)
class StageMemory:
    """Peak memory of one NPU of a pipeline stage, in bytes, by kind."""

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int

    @property
    def total_bytes(self) -> int:
        """The peak: every term is live at once at the start of the first backward pass."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes


@dataclass(frozen=True)
class ActivationTerms:
    """One layer's activations for one micro-batch, in bytes, in Korthikanti et al.'s parts (module docstring):
    ``replicated`` over TP unless sequence parallelism splits them along the sequence, ``split`` over TP, the
    ``attention`` core's (split over TP, dropped by selective recomputation), all counted for the whole layer;
    and ``per_rank``, already counted for one TP rank (an MoE layer's dispatched tokens)."""

    replicated: int
    split: int
    attention: int
    per_rank: int = 0

    def on_rank(self, tp: int, sequence_parallel: bool, *, keep_attention: bool = True) -> int:
        """The bytes one TP rank keeps; exact in integers when ``tp`` divides the heads, key-value heads and
        MLP size (and the sequence, with sequence parallelism), as the plan's validation ensures."""
        replicated = self.replicated // tp if sequence_parallel else self.replicated
        attention = self.attention // tp if keep_attention else 0
        return replicated + self.split // tp + attention + self.per_rank


def layer_activation_bytes(
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    tp: int,
    *,
    sequence_parallel: bool = False,
    selective: bool = False,
) -> int:
    """Korthikanti et al.'s table 2 for a GPT layer (one key-value head per head, GeLU, ``ffn = 4h``) on a TP
    rank: ``s b h (10 + 24/t + 5 a s / (h t))``, ``s b h (34/t + 5 a s / (h t))`` with sequence parallelism, and
    without the ``5 a s / (h t)`` term with selective recomputation."""
    sbh = seq_len * micro_batch * hidden
    terms = ActivationTerms(10 * sbh, 24 * sbh, 5 * heads * seq_len * seq_len * micro_batch)
    return terms.on_rank(tp, sequence_parallel, keep_attention=not selective)


def layer_terms(config: TransformerConfig, moe: bool) -> ActivationTerms:
    """The parts of one layer's activations (a mixture-of-experts layer if ``moe``) for ``config``'s model."""
    model, plan = config.model, config.parallelism
    sb, h = config.local_seq_len * plan.micro_batch, model.hidden
    inner = model.mlp_up_width + model.ffn_size
    attention = 5 * model.heads * model.seq_len * sb if config.attention == "unfused" else 4 * model.heads * sb
    split = 4 * sb * model.attention_width + 4 * sb * model.kv_head_count * model.head_size
    if not moe:
        return ActivationTerms(replicated=10 * sb * h, split=split + 2 * sb * inner, attention=attention)
    moe_layers = sum(model.moe_layer(index) for index in range(model.layers))
    slots = max(layer_routing(config, layer).slots for layer in range(moe_layers))  # the fullest layer's
    return ActivationTerms(
        replicated=10 * sb * h + 2 * sb * model.experts,
        split=split,
        attention=attention,
        per_rank=2 * slots * h + 2 * slots * inner // plan.tp,
    )


def attention_core_bytes(config: TransformerConfig) -> int:
    """The attention core's activations of one layer and micro-batch on a TP rank: ``5 a s^2 b / t`` unfused, what
    selective recomputation drops and recomputes; ``4 a s b / t`` fused, the row statistics it keeps."""
    plan = config.parallelism
    return layer_terms(config, moe=False).attention // plan.tp


@dataclass(frozen=True)
class LayerActivations:
    """One layer's activation memory for one micro-batch on a TP rank, in bytes: ``kept_bytes`` held from its
    forward pass to the end of its backward pass and ``recomputed_bytes`` held during recomputation and the
    backward pass."""

    kept_bytes: int
    recomputed_bytes: int


def layer_activations(config: TransformerConfig, moe: bool = False) -> LayerActivations:
    """A layer's (an MoE layer's if ``moe``) ``A`` all kept without recomputation; with full recomputation, its
    input ``2 s b h`` (split along the sequence with sequence parallelism) kept and ``A`` recomputed; with
    selective recomputation of an unfused attention core, all but the core's part kept and that part recomputed
    (a fused core keeps only its row statistics, which selective recomputation keeps too: nothing is recomputed)."""
    model, plan = config.model, config.parallelism
    terms = layer_terms(config, moe)
    full = terms.on_rank(plan.tp, plan.sequence_parallel)
    if plan.recompute == "full":
        layer_input = 2 * config.local_seq_len * plan.micro_batch * model.hidden
        kept = layer_input // plan.tp if plan.sequence_parallel else layer_input
        return LayerActivations(kept_bytes=kept, recomputed_bytes=full)
    if plan.recompute == "selective" and config.attention == "unfused":
        kept = terms.on_rank(plan.tp, plan.sequence_parallel, keep_attention=False)
        return LayerActivations(kept_bytes=kept, recomputed_bytes=full - kept)
    return LayerActivations(kept_bytes=full, recomputed_bytes=0)


def micro_batches_in_flight(schedule: str, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> int:
    """(Chunk, micro-batch) forward passes whose activations ``stage`` holds at once, at most (with one chunk per
    stage, micro-batches): ``m`` for GPipe, ``min(stages - stage, m)`` for 1F1B, and for the interleaved schedule
    ``v m`` if ``m = stages``, else ``min(2 (stages - stage - 1) + (v - 1) stages + 1, v m)``; see the module
    docstring."""
    if schedule == "gpipe":
        return micro_batches
    if schedule == "1f1b":
        return min(stages - stage, micro_batches)
    if schedule != "interleaved":
        raise ValueError(f"unknown pipeline schedule {schedule!r}; expected gpipe, 1f1b or interleaved")
    total = chunks * micro_batches
    if micro_batches == stages:
        return total
    return min(2 * (stages - stage - 1) + (chunks - 1) * stages + 1, total)


def weight_pass_bytes(steps: tuple[Step, ...], kept_bytes: int, element: int) -> int:
    """What a layer's input-gradient pass leaves for its weight-gradient pass under a zero-bubble schedule: each
    GEMM with weights keeps its input ``m k`` and its output gradient ``m n`` (``element`` bytes each) until its
    weight-gradient GEMM runs; at most ``kept_bytes``, the layer's activations as its backward pass sees them (the
    kept ones, or under full recomputation the recomputed ones; the inputs are part of them, and the output
    gradients are counted in their stead: what is not modelled stays so)."""
    gemms = [step for step in steps if isinstance(step, Gemm) and step.weights]
    return min(kept_bytes, sum(g.batch * g.m * (g.k + g.n) for g in gemms) * element)


def split_schedule_peak(order: tuple[Pass, ...], kept: list[int], weight: list[int]) -> int:
    """The most activation memory a stage holds along ``order`` (a zero-bubble or DualPipe order), its local chunk
    ``c`` holding ``kept[c]`` per micro-batch from its forward pass to its backward pass, or to its input pass and
    then ``weight[c]`` to its weight pass."""
    change = {
        "forward": lambda c: kept[c],
        "backward": lambda c: -kept[c],
        "input": lambda c: weight[c] - kept[c],
        "weight": lambda c: -weight[c],
    }
    live = peak = 0
    for step in order:
        live += change[step.direction](step.chunk)
        peak = max(peak, live)
    return peak


def stage_memory(
    config: TransformerConfig,
    stage: int,
    parameters: int,
    micro_batches: int,
    expert_parameters: int = 0,
    weight_bytes: tuple[int, ...] = (),
    times: PassTimes = (),
) -> StageMemory:
    """Peak memory of an NPU of pipeline ``stage`` holding ``parameters`` dense and ``expert_parameters`` expert
    parameters and running ``micro_batches`` micro-batches per iteration; the formulas are in the module
    docstring. ``weight_bytes``: under a zero-bubble or DualPipe schedule, what each local chunk's input pass
    leaves for its weight pass, per micro-batch (:func:`weight_pass_bytes` summed over its layers); ``times``, the
    pass times ZB-H2's and ZB-V's orders were built from (:func:`pipeline_order`)."""
    model, plan = config.model, config.parallelism
    element = operators.dtype_bytes(operators.parse_dtype(config.precision))
    positions = chunk_positions(placement(plan.schedule), stage, plan.pp, plan.chunks_per_stage)
    chunks = [[layer_activations(config, model.moe_layer(i)) for i in config.chunk_layers(g)] for g in positions]
    recomputed = max(layer.recomputed_bytes for chunk in chunks for layer in chunk)
    if plan.schedule in SPLIT_SCHEDULES:
        order = pipeline_order(plan.schedule, stage, plan.pp, micro_batches, plan.chunks_per_stage, times)
        held = [sum(layer.kept_bytes for layer in chunk) for chunk in chunks]
        activations = split_schedule_peak(order, held, list(weight_bytes or (0,) * len(chunks)))
    else:
        in_flight = micro_batches_in_flight(plan.schedule, stage, plan.pp, micro_batches, plan.virtual_stages)
        activations = max(sum(layer.kept_bytes for layer in chunk) for chunk in chunks) * in_flight
    return StageMemory(
        weights_bytes=element * _held(config, 3, parameters, expert_parameters),
        gradients_bytes=element * _held(config, 2, parameters, expert_parameters),
        optimizer_bytes=OPTIMIZER_BYTES_PER_PARAMETER * _held(config, 1, parameters, expert_parameters),
        activations_bytes=activations + recomputed,
    )


def _held(config: TransformerConfig, zero_stage: int, dense: int, expert: int) -> int:
    """How many of a rank's ``dense`` and ``expert`` parameters' copies of one kind it holds: all of them, or its
    ZeRO shard (``ceil`` of a share of the DP group, of the expert-data-parallel group for experts) from ZeRO
    stage ``zero_stage`` on."""
    plan = config.parallelism
    if plan.zero < zero_stage:
        return dense + expert
    return -(-dense // plan.shard_ranks) + -(-expert // plan.expert_data_ranks)


def checkpoint_shard_bytes(config: TransformerConfig, dense: int, expert: int) -> int:
    """The bytes of one model shard's checkpoint, each written once: the weights and mixed-precision Adam states
    (:data:`OPTIMIZER_BYTES_PER_PARAMETER` a parameter) of one TP rank of a pipeline stage holding ``dense`` dense
    parameters and, on each of the ``ep`` expert-parallel ranks of its DP group, ``expert`` expert parameters."""
    element = operators.dtype_bytes(operators.parse_dtype(config.precision))
    return (element + OPTIMIZER_BYTES_PER_PARAMETER) * (dense + config.parallelism.ep * expert)
