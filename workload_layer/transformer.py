"""A GPT-style transformer trained with Megatron-LM's 3D parallelism: tensor (TP), pipeline (PP) and data (DP).

One iteration per NPU, built from hyperparameters and a parallelism plan:

- Ranks: TP innermost, then PP, then DP: ``npu = tp_rank + tp * (pp_rank + pp * dp_rank)``, so on a topology
  whose dimensions are ``[tp, pp, dp]`` a TP group is one line of dimension 0 (contiguous ids) and a DP group one
  line of dimension 2 (ids ``tp * pp`` apart).
- Each pipeline stage holds ``layers / pp`` layers; the first also the (vocabulary-parallel) embedding, the last
  the final layernorm, the LM head GEMM and the loss.
- A layer on a TP rank (``t = micro_batch * seq_len`` tokens, ``d = hidden / heads``): layernorm, QKV GEMM
  ``[t, h] x [h, 3h/tp]``, attention scores and context as GEMMs batched over ``micro_batch * heads / tp``
  (``[s, d] x [d, s]`` and ``[s, s] x [s, d]``) with a softmax between, output projection
  ``[t, h/tp] x [h/tp, h]``, TP all-reduce, residual + layernorm, MLP ``[t, h] x [h, ffn/tp]``, GeLU,
  ``[t, ffn/tp] x [ffn/tp, h]``, TP all-reduce, residual. The backward pass runs each GEMM as input- and
  weight-gradient GEMMs (2x the forward FLOPs) and all-reduces the input gradient before each column-parallel
  GEMM over the TP group; TP all-reduces carry ``t * hidden`` elements.
- Between stages, one micro-batch's activation (forward) or gradient (backward), ``t * hidden`` elements, goes
  to the same TP rank of the neighbouring stage, in the order of the GPipe or 1F1B schedule
  (:mod:`workload_layer.transformer_schedule`). Full recomputation re-runs each layer's forward pass (with its
  all-reduces) before its backward pass.
- After the last backward pass, the stage's gradients (its parameters per TP rank, in ``precision``) are
  all-reduced over the DP group.

Not modelled: sequence parallelism, ZeRO, interleaved schedules, the vocabulary-parallel cross-entropy's small
all-reduces, the embedding-gradient all-reduce between the first and last stages, dropout, the optimizer step,
and overlap of the DP all-reduce with the backward pass. Pointwise FLOP counts per element are estimates
(layernorm 8, softmax 5, GeLU 8, residual 1); GEMM FLOPs are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from stratasim import operators
from stratasim.errors import WorkloadError
from stratasim.schema import DTypeName, Section
from stratasim.v1 import workload_pb2
from workload_layer.transformer_memory import StageMemory, stage_memory
from workload_layer.transformer_schedule import (
    Block,
    Gemm,
    Pointwise,
    StagePlan,
    TensorParallelSum,
    build_graph,
    pipeline_order,
)

__all__ = ["TransformerWorkload", "TransformerConfig", "ModelConfig", "ParallelismConfig"]


class ModelConfig(Section):
    """``workload.model``: a GPT-style decoder; ``ffn`` is the MLP's inner size (default ``4 * hidden``)."""

    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    vocab: int = Field(gt=0)
    ffn: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _head_size(self) -> ModelConfig:
        if self.hidden % self.heads:
            raise ValueError(f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})")
        return self

    @property
    def ffn_size(self) -> int:
        """The MLP's inner size."""
        return 4 * self.hidden if self.ffn is None else self.ffn


class ParallelismConfig(Section):
    """``workload.parallelism``: the plan. ``global_batch`` defaults to ``micro_batch * dp`` (one micro-batch per
    pipeline); ``zero`` and ``sequence_parallel`` are accepted only at their defaults (not modelled yet)."""

    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    dp: int = Field(default=1, ge=1)
    schedule: Literal["gpipe", "1f1b"] = "1f1b"
    micro_batch: int = Field(default=1, ge=1)
    global_batch: int | None = Field(default=None, ge=1)
    recompute: Literal["none", "full"] = "none"
    zero: Literal[0] = 0
    sequence_parallel: Literal[False] = False

    @model_validator(mode="after")
    def _whole_micro_batches(self) -> ParallelismConfig:
        if self.batch % (self.micro_batch * self.dp):
            raise ValueError(
                f"parallelism.global_batch ({self.batch}) must be divisible by micro_batch * dp "
                f"({self.micro_batch} * {self.dp})"
            )
        return self

    @property
    def batch(self) -> int:
        """The global batch in samples."""
        return self.micro_batch * self.dp if self.global_batch is None else self.global_batch


class TransformerConfig(Section):
    """``workload:`` keys of ``kind: transformer``."""

    model: ModelConfig
    parallelism: ParallelismConfig = Field(default_factory=ParallelismConfig)
    precision: DTypeName = "bf16"


    @model_validator(mode="after")
    def _divisible(self) -> TransformerConfig:
        model, plan = self.model, self.parallelism
        checks = (
            ("model.layers", model.layers, "parallelism.pp", plan.pp),
            ("model.heads", model.heads, "parallelism.tp", plan.tp),
            ("model.ffn", model.ffn_size, "parallelism.tp", plan.tp),
        )
        for name, value, by_name, by in checks:
            if value % by:
                raise ValueError(f"{name} ({value}) must be divisible by {by_name} ({by})")
        return self


class TransformerWorkload:
    """Builds one training iteration's graph per NPU; see the module docstring for what is modelled."""

    name = "transformer"
    Config = TransformerConfig

    def __init__(self, config: TransformerConfig) -> None:
        self.config = config
        self._dtype = operators.parse_dtype(config.precision)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration: ``global_batch / (micro_batch * dp)``."""
        plan = self.config.parallelism
        return plan.batch // (plan.micro_batch * plan.dp)

    def npus_required(self) -> int:
        plan = self.config.parallelism
        return plan.tp * plan.pp * plan.dp

    def samples_per_iteration(self) -> int:
        """Samples (sequences) one iteration trains on: the global batch."""
        return self.config.parallelism.batch

    def model_flops_per_iteration(self) -> int:
        """Model FLOPs of one iteration as Megatron-LM counts them (Narayanan et al., "Efficient Large-Scale
        Language Model Training on GPU Clusters Using Megatron-LM", SC'21, eq. 3):
        ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``, and with full recomputation ``96 B s l h^2 (1 + s/(6h) +
        V/(16 l h))`` (the layers' terms times 4/3; the LM head is not recomputed), with B the global batch.

        Counted here for any ``ffn`` (the paper's formula is the case ``ffn = 4h``): per token and layer, the
        forward GEMMs take ``2(4h^2 + 2 h ffn) + 4 s h`` FLOPs; backward passes double them, recomputation adds
        one more forward pass; the LM head adds ``2 h V`` forward. Pointwise operators are not counted.
        """
        model, plan = self.config.model, self.config.parallelism
        h, s, tokens = model.hidden, model.seq_len, plan.batch * model.seq_len
        layer_forward = 2 * (4 * h * h + 2 * h * model.ffn_size) + 4 * s * h
        passes = 4 if plan.recompute == "full" else 3
        return tokens * (passes * model.layers * layer_forward + 3 * 2 * h * model.vocab)

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        required = self.npus_required()
        if npus != required:
            raise WorkloadError(f"workload: the transformer's plan needs exactly tp * pp * dp = {required} NPUs, got {npus}")
        plan = self.config.parallelism
        stages = [self._stage_blocks(stage) for stage in range(plan.pp)]
        return [build_graph(self._plan(npu, stages)) for npu in range(npus)]

    def _plan(self, npu: int, stages: list[tuple[Block, ...]]) -> StagePlan:
        plan, model = self.config.parallelism, self.config.model
        tp, pp = plan.tp, plan.pp
        tp_rank, pp_rank = npu % tp, npu // tp % pp
        activation = plan.micro_batch * model.seq_len * model.hidden * operators.dtype_bytes(self._dtype)
        return StagePlan(
            npu=npu,
            blocks=stages[pp_rank],
            order=pipeline_order(plan.schedule, pp_rank, pp, self.micro_batches),
            previous_stage=npu - tp if pp_rank > 0 else None,
            next_stage=npu + tp if pp_rank < pp - 1 else None,
            tensor_group=tuple(range(npu - tp_rank, npu - tp_rank + tp)),
            data_group=tuple(tp_rank + tp * (pp_rank + pp * d) for d in range(plan.dp)),
            boundary_bytes=activation,
            tensor_bytes=activation,
            gradient_bytes=self.stage_parameters(pp_rank) * operators.dtype_bytes(self._dtype),
            dtype=self._dtype,
        )

    def stage_parameters(self, stage: int) -> int:
        """Parameters one TP rank of pipeline ``stage`` holds (and all-reduces the gradients of over DP).

        A layer: its GEMM weights and column-parallel biases split over TP, row-parallel biases and two
        layernorms replicated. The first stage adds the word embeddings (split over TP, vocabulary padded to a
        multiple of tp) and position embeddings; the last the final layernorm and, when it is not also the first
        stage, its copy of the tied word embeddings.
        """
        model, plan = self.config.model, self.config.parallelism
        h, f, tp = model.hidden, model.ffn_size, plan.tp
        per_layer = (4 * h * h + 2 * h * f + 3 * h + f) // tp + 2 * h + 4 * h
        total = per_layer * model.layers // plan.pp
        word_embeddings = -(-model.vocab // tp) * h
        if stage == 0:
            total += word_embeddings + model.seq_len * h
        if stage == plan.pp - 1:
            total += 2 * h + (word_embeddings if stage > 0 else 0)
        return total

    def stage_memory(self, stage: int) -> StageMemory:
        """Peak memory of an NPU of pipeline ``stage`` by kind (weights, gradients, Adam states, activations);
        formulas in :mod:`workload_layer.transformer_memory`."""
        return stage_memory(self.config, stage, self.stage_parameters(stage), self.micro_batches)

    def memory_per_npu_bytes(self) -> list[int]:
        """Peak memory in bytes of each NPU (index = NPU id): weights + gradients + mixed-precision Adam states
        (12 bytes per parameter) + the activations of the micro-batches in flight on its pipeline stage; every TP
        and DP rank of a stage holds the same. See :mod:`workload_layer.transformer_memory`."""
        plan = self.config.parallelism
        per_stage = [self.stage_memory(stage).total_bytes for stage in range(plan.pp)]
        return [per_stage[npu // plan.tp % plan.pp] for npu in range(self.npus_required())]

    def _stage_blocks(self, stage: int) -> tuple[Block, ...]:
        model, plan = self.config.model, self.config.parallelism
        per_stage = model.layers // plan.pp
        tokens = plan.micro_batch * model.seq_len
        blocks: list[Block] = []
        if stage == 0:
            embed = Pointwise("embedding", (tokens, model.hidden), flops_per_element=1, inputs=2)
            blocks.append(Block("embedding", (embed, TensorParallelSum(in_forward=True))))
        blocks += [self._layer(f"layer{stage * per_stage + i}") for i in range(per_stage)]
        if stage == plan.pp - 1:
            vocab = -(-model.vocab // plan.tp)
            head = (
                Pointwise("final layernorm", (tokens, model.hidden), flops_per_element=8),
                TensorParallelSum(in_forward=False),
                Gemm("lm head", tokens, model.hidden, vocab),
                Pointwise("loss", (tokens, vocab), flops_per_element=5),
            )
            blocks.append(Block("head", head))
        return tuple(blocks)

    def _layer(self, name: str) -> Block:
        model, plan = self.config.model, self.config.parallelism
        h, s, tp = model.hidden, model.seq_len, plan.tp
        tokens, heads = plan.micro_batch * s, plan.micro_batch * model.heads // tp
        d, f = h // model.heads, model.ffn_size // tp
        steps = (
            Pointwise("layernorm", (tokens, h), flops_per_element=8),
            TensorParallelSum(in_forward=False),
            Gemm("qkv", tokens, h, 3 * h // tp),
            Gemm("attention scores", s, d, s, batch=heads),
            Pointwise("softmax", (heads, s, s), flops_per_element=5),
            Gemm("attention context", s, s, d, batch=heads),
            Gemm("attention projection", tokens, h // tp, h),
            TensorParallelSum(in_forward=True),
            Pointwise("residual layernorm", (tokens, h), flops_per_element=9, inputs=2),
            TensorParallelSum(in_forward=False),
            Gemm("mlp up", tokens, h, f),
            Pointwise("gelu", (tokens, f), flops_per_element=8),
            Gemm("mlp down", tokens, f, h),
            TensorParallelSum(in_forward=True),
            Pointwise("residual", (tokens, h), flops_per_element=1, inputs=2),
        )
        return Block(name, steps, recompute=plan.recompute == "full")
