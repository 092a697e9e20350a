"""Mixture-of-experts (MoE) layers with expert parallelism (EP): who holds which experts and how many tokens
they see.

Placement, as Megatron-core and DeepSpeed-MoE do it: EP groups are carved out of the data-parallel group. The
``dp`` replicas of a (TP rank, pipeline stage) form ``dp / ep`` EP groups of ``ep`` consecutive DP ranks, and
each member holds ``experts / ep`` of every MoE layer's experts. Expert gradients are therefore averaged over the
``dp / ep`` DP ranks holding the same experts (the same position in every EP group: the expert-data-parallel
group), dense gradients over the whole DP group.

Routing, with GShard's and Switch's expert capacity: a rank routes its ``T_r`` tokens, each to its ``top_k``
experts, and every expert accepts at most ``C = ceil(capacity_factor * top_k * T_r / experts)`` tokens from each
rank (tokens beyond are dropped, unused slots padded, so the work is sized by the capacity). Hence:

- the dispatch all-to-all sends ``C`` token slots to each of the ``E`` experts: a buffer of ``E C`` tokens of
  ``hidden`` elements per rank, ``(E / ep) C`` of them to each EP peer; the combine all-to-all returns as many;
- a rank's ``E / ep`` experts receive ``C`` tokens from each of the ``ep`` members, ``ep C`` tokens per expert
  and ``E C ~ capacity_factor * top_k * T_r`` in all, whatever ``ep`` is (EP spreads the experts, not the work);
- with sequence parallelism each TP rank routes its own ``T_r = tokens / tp`` and, as Megatron-core's all-to-all
  dispatcher does, the dispatched tokens are then all-gathered over TP for the TP-split expert GEMMs: each local
  expert computes ``tp ep C`` tokens. Without it (``tp = 1``, or ``ep = 1``) every TP rank routes all ``tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from stratasim.workload_layer.transformer.config import TransformerConfig

__all__ = ["Routing", "routing", "layer_routing", "expert_capacity", "expert_groups"]


def expert_capacity(tokens: int, experts: int, top_k: int, capacity_factor: float) -> int:
    """GShard's capacity ``ceil(capacity_factor * top_k * tokens / experts)``: the tokens one expert accepts from
    a rank routing ``tokens`` tokens. The factor is read as the nearest fraction of denominator at most 10^6, so
    that a factor such as 1.1 does not round up past an exact product."""
    factor = Fraction(capacity_factor).limit_denominator(10**6)
    return ceil(factor * top_k * tokens / experts)


@dataclass(frozen=True)
class Routing:
    """The token counts of one MoE layer on one rank for one micro-batch (see the module docstring).

    ``routed_tokens`` is ``T_r``, ``capacity`` is ``C``, ``local_experts`` is ``E / ep``, ``expert_tokens`` the
    tokens each local expert's GEMMs process (``ep C``, times ``tp`` when gathered over TP) and
    ``dispatched_tokens`` the token slots of the rank's all-to-all buffer (``E C``).
    """

    routed_tokens: int
    capacity: int
    local_experts: int
    expert_tokens: int
    dispatched_tokens: int


def routing(tokens: int, experts: int, top_k: int, capacity_factor: float, ep: int, tp_gather: int) -> Routing:
    """The routing of a micro-batch of ``tokens`` tokens split over ``tp_gather`` sequence-parallel TP ranks (1
    without sequence parallelism) onto ``experts`` experts spread over ``ep`` ranks."""
    routed = tokens // tp_gather
    capacity = expert_capacity(routed, experts, top_k, capacity_factor)
    return Routing(
        routed_tokens=routed,
        capacity=capacity,
        local_experts=experts // ep,
        expert_tokens=tp_gather * ep * capacity,
        dispatched_tokens=experts * capacity,
    )


def layer_routing(config: TransformerConfig) -> Routing:
    """The routing of one MoE layer of ``config`` on one rank for one micro-batch."""
    model, plan = config.model, config.parallelism
    return routing(
        plan.micro_batch * model.seq_len,
        model.experts,
        model.top_k,
        model.capacity_factor,
        plan.ep,
        plan.tp if plan.sequence_parallel else 1,
    )


def expert_groups(dp_rank: int, dp: int, ep: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The DP ranks of ``dp_rank``'s EP group (``ep`` consecutive ranks) and of its expert-data-parallel group
    (the ``dp / ep`` ranks at the same position of every EP group), each in rank order."""
    first = dp_rank - dp_rank % ep
    return tuple(range(first, first + ep)), tuple(range(dp_rank % ep, dp, ep))
