"""Peak memory of one NPU training a Megatron-style transformer (:mod:`workload_layer.transformer`).

For an NPU of pipeline stage ``p`` (any TP or DP rank; all ranks of a stage hold the same amount), in bytes:

- ``weights = P * e`` and ``gradients = P * e``, with ``P`` the parameters one TP rank of the stage holds
  (:meth:`TransformerWorkload.stage_parameters`, so the embeddings on the first stage and the final layernorm and
  tied LM head on the last are included) and ``e`` the bytes of ``precision``;
- ``optimizer = 12 * P``: Adam in mixed precision keeps an fp32 master copy, momentum and variance of every
  parameter, 4 + 4 + 4 bytes (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", SC'20, section 3.1: ``K = 12``); no ZeRO sharding over DP;
- ``activations``, with ``s`` the sequence length, ``b`` the micro-batch, ``h`` hidden, ``a`` heads, ``t`` the TP
  degree, ``L_p = layers / pp`` the stage's layers and ``n_p`` the micro-batches in flight on the stage:

  - one layer and micro-batch stores ``A = s b h (10 + 24/t + 5 a s / (h t))`` bytes (Korthikanti et al.,
    "Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198, 2022, eq. 2: 16-bit
    activations, TP without sequence parallelism; ``t = 1`` gives their ``s b h (34 + 5 a s / h)``; the
    layernorms, their inputs and two dropout masks, ``10 s b h``, are replicated over TP, the rest split);
  - without recomputation: ``A * L_p * n_p``;
  - with full recomputation only each layer's input is kept, ``2 s b h`` bytes (replicated over TP), plus one
    layer's full activations while its backward pass runs: ``2 s b h * L_p * n_p + A``;
  - ``n_p = m`` for GPipe (every forward pass precedes every backward pass) and ``min(pp - p, m)`` for 1F1B
    (stage ``p`` runs ``pp - p - 1`` warm-up forward passes, then frees one micro-batch per new one), with ``m`` the
    micro-batches per iteration.

Not modelled: activations of the embedding and LM head (logits, loss), the activation precision (always the
16-bit formula), temporary buffers, communication buffers, fragmentation and the framework's own footprint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stratasim import operators

if TYPE_CHECKING:
    from workload_layer.transformer import TransformerConfig

__all__ = ["StageMemory", "OPTIMIZER_BYTES_PER_PARAMETER", "layer_activation_bytes", "micro_batches_in_flight",
           "stage_memory"]

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


def layer_activation_bytes(seq_len: int, micro_batch: int, hidden: int, heads: int, tp: int) -> int:
    """Korthikanti et al.'s ``s b h (10 + 24/t + 5 a s / (h t))`` bytes of one layer and micro-batch on a TP rank;
    exact in integers because ``t`` divides ``a`` (and so ``h``)."""
    sbh = seq_len * micro_batch * hidden
    return 10 * sbh + 24 * sbh // tp + 5 * heads * seq_len * seq_len * micro_batch // tp


def micro_batches_in_flight(schedule: str, stage: int, stages: int, micro_batches: int) -> int:
    """Micro-batches whose activations ``stage`` holds at once: all ``m`` for GPipe, ``min(stages - stage, m)``
    for 1F1B."""
    if schedule == "gpipe":
        return micro_batches
    if schedule != "1f1b":
        raise ValueError(f"unknown pipeline schedule {schedule!r}; expected gpipe or 1f1b")
    return min(stages - stage, micro_batches)


def stage_memory(config: TransformerConfig, stage: int, parameters: int, micro_batches: int) -> StageMemory:
    """Peak memory of an NPU of pipeline ``stage`` holding ``parameters`` parameters and running ``micro_batches``
    micro-batches per iteration; the formulas are in the module docstring."""
    model, plan = config.model, config.parallelism
    element = operators.dtype_bytes(operators.parse_dtype(config.precision))
    layers = model.layers // plan.pp
    in_flight = micro_batches_in_flight(plan.schedule, stage, plan.pp, micro_batches)
    layer = layer_activation_bytes(model.seq_len, plan.micro_batch, model.hidden, model.heads, plan.tp)
    if plan.recompute == "full":
        activations = 2 * model.seq_len * plan.micro_batch * model.hidden * layers * in_flight + layer
    else:
        activations = layer * layers * in_flight
    return StageMemory(
        weights_bytes=parameters * element,
        gradients_bytes=parameters * element,
        optimizer_bytes=OPTIMIZER_BYTES_PER_PARAMETER * parameters,
        activations_bytes=activations,
    )
