"""Mixture-of-experts (MoE) layers with expert parallelism (EP): who holds which experts and how many tokens
they see.

Placement, as Megatron-core and DeepSpeed-MoE do it: EP groups are carved out of the data-parallel group. The
``dp`` replicas of a (TP rank, pipeline stage) form ``dp / ep`` EP groups of ``ep`` consecutive DP ranks, and
each member holds ``experts / ep`` of every MoE layer's experts. Expert gradients are therefore averaged over the
``dp / ep`` DP ranks holding the same experts (the same position in every EP group: the expert-data-parallel
group), dense gradients over the whole DP group. With context parallelism the EP groups are carved out of the
combined DP x CP group (CP fastest), as Megatron-core's expert rank generator folds CP into EP and expert-DP
(``cp=1`` there, ``expert_data_parallel_size = world / (etp ep pp)``): ``dp cp / ep`` EP groups, each expert
layer routing the ``micro_batch seq_len / cp`` tokens of the rank's sequence chunks.

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

Skewed routing (``model.routing``, :mod:`stratasim.workload_layer.transformer.expert_placement` places each layer's
experts): expert ``e`` is wanted by ``ceil(top_k T_r p_e)`` of a rank's assignments for its share ``p_e``, takes at
most ``C`` of them and drops the rest (reported); every rank routes alike. Padded to capacity (the default, as
above) every expert still computes ``C`` slots and only the drops change; with ``pad_to_capacity: false`` an expert
computes what it took, so the busiest rank's experts set the pace of the layer (every rank of the EP group waits
for them at the combine), and the all-to-alls become all-to-all-v's, each peer receiving its experts' tokens:
priced as the even all-to-all whose messages are all the busiest peer's
(:func:`~stratasim.kernel.collective_types.uneven_all_to_all_bytes`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import ceil

from stratasim.workload_layer.transformer.config import ModelConfig, TransformerConfig
from stratasim.workload_layer.transformer.expert_placement import LayerPlacement, expert_placements, place
from stratasim.workload_layer.transformer.routing import RoutingConfig, uniform_shares

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

    ``routed_tokens`` is ``T_r``, ``capacity`` is ``C``, ``expert_tokens`` the tokens each of the busiest rank's
    experts' GEMMs process (``ep C`` each without routing skew, times ``tp`` when gathered over TP),
    ``dispatched_tokens`` the token slots of the rank's all-to-all buffer (``E C``; under skew the even buffer
    whose every per-peer message is the busiest peer's) and ``dropped_tokens`` the token-to-expert assignments of
    the rank's ``top_k T_r`` that found their expert full.
    """

    routed_tokens: int
    capacity: int
    expert_tokens: tuple[int, ...]
    dispatched_tokens: int
    dropped_tokens: int = 0

    @property
    def local_experts(self) -> int:
        """The (physical) experts a rank holds: ``E / ep``, plus its share of any redundant ones."""
        return len(self.expert_tokens)

    @property
    def slots(self) -> int:
        """The tokens the busiest rank's experts process together."""
        return sum(self.expert_tokens)

    @property
    def groups(self) -> tuple[tuple[int, int], ...]:
        """The busiest rank's experts as ``(tokens, experts)`` groups taking equal tokens, the busiest first (one
        group under even routing: the GEMMs batched over them)."""
        return tuple(sorted(Counter(tokens for tokens in self.expert_tokens if tokens).items(), reverse=True))


@lru_cache(maxsize=4096)
def routing(
    tokens: int,
    experts: int,
    top_k: int,
    capacity_factor: float,
    ep: int,
    tp_gather: int,
    placement: LayerPlacement | None = None,
    pad: bool = True,
) -> Routing:
    """The routing of a micro-batch of ``tokens`` tokens split over ``tp_gather`` sequence-parallel TP ranks (1
    without sequence parallelism) onto ``experts`` experts spread over ``ep`` ranks: evenly, or as ``placement``
    places the layer's routed shares. Every rank routes alike, each expert taking ``min(C, ceil(top_k T_r x
    share))`` tokens from each rank, the rest dropped; ``pad`` computes every expert's whole capacity ``C``."""
    routed = tokens // tp_gather
    capacity = expert_capacity(routed, experts, top_k, capacity_factor)
    wanted = (placement or _even(experts, ep)).rank_tokens(top_k * routed)
    dropped = sum(max(0, count - capacity) for rank in wanted for count in rank)
    taken = [tuple(capacity if pad else min(capacity, count) for count in rank) for rank in wanted]
    busiest = max(taken, key=sum)
    return Routing(
        routed_tokens=routed,
        capacity=capacity,
        expert_tokens=tuple(tp_gather * ep * count for count in busiest),
        dispatched_tokens=ep * sum(busiest),
        dropped_tokens=dropped,
    )


def layer_routing(config: TransformerConfig, layer: int = 0) -> Routing:
    """The routing of the ``layer``-th MoE layer (counted among them) of ``config`` on one rank for one
    micro-batch: of its ``micro_batch seq_len / cp`` tokens."""
    model, plan = config.model, config.parallelism
    pad = model.routing is None or model.routing.pad_to_capacity
    return routing(
        plan.micro_batch * config.local_seq_len,
        model.experts,
        model.top_k,
        model.capacity_factor,
        plan.ep,
        plan.tp if plan.sequence_parallel else 1,
        None if model.routing is None else _placement(model, model.routing, plan.ep, layer),
        pad,
    )


def _placement(model: ModelConfig, routing: RoutingConfig, ep: int, layer: int) -> LayerPlacement:
    """The ``layer``-th MoE layer's placement on ``ep`` ranks under ``model``'s ``routing``: the routing's
    placements of every layer, made (a routing trace read) once per model shape and plan."""
    key = ("placements", model.layers, model.moe_every, model.experts, ep)
    return routing.derived(key, lambda: expert_placements(model, ep))[layer]


@lru_cache(maxsize=256)
def _even(experts: int, ep: int) -> LayerPlacement:
    """``experts`` experts placed evenly on ``ep`` ranks, each routed ``1 / experts`` of the tokens."""
    return place(uniform_shares(experts), ep, 0)


def expert_groups(position: int, ranks: int, ep: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The places, in a DP x CP group of ``ranks`` members (CP fastest), of the EP group of the member at
    ``position`` (``ep`` consecutive members) and of its expert-data-parallel group (the ``ranks / ep`` members at
    the same place of every EP group), each in order."""
    first = position - position % ep
    return tuple(range(first, first + ep)), tuple(range(position % ep, ranks, ep))
