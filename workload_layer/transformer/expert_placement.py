"""Which EP rank holds which experts, and how many tokens each rank's experts take under a routing's shares.

Without redundant experts the placement is Megatron-core's and vLLM's: EP rank ``q`` of ``ep`` holds the
contiguous block of experts ``q E / ep`` to ``(q + 1) E / ep - 1``. With ``redundant_experts: R`` each layer is
placed as DeepSeek's EPLB places it (its global policy, ``rebalance_experts`` with one group and node): ``R`` times,
the expert with the highest load per replica gets one more replica (the load split evenly over its replicas), then
the ``E + R`` physical experts, heaviest first, each go to the least-loaded rank that still has a free slot
(``(E + R) / ep`` slots a rank; ties to the lower rank, equal loads in expert order).

An expert's tokens from ``A`` token-to-expert assignments are ``ceil(A x share)`` (its replica's share), so the
uniform shares of a study without routing give every expert ``ceil(A / E)``, the even share StrataSim always used.
The busiest rank is the one whose experts take the most tokens (the first such); its experts set the pace of
the group's expert part, and its share of the assignments the size of the all-to-alls' largest per-peer message.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from math import ceil

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.transformer.config import ModelConfig
from stratasim.workload_layer.transformer.routing import Shares, uniform_shares, zipf_shares
from stratasim.workload_layer.transformer.routing_trace import read_routing_trace

__all__ = ["LayerPlacement", "expert_placements", "place", "eplb_replicas"]


@dataclass(frozen=True)
class LayerPlacement:
    """One mixture-of-experts layer's physical experts per EP rank, each as its share of the layer's
    token-to-expert assignments (a replica's share being its expert's over its replicas)."""

    ranks: tuple[Shares, ...]

    @cached_property
    def rank_shares(self) -> Shares:
        """Each rank's share of the assignments: of the tokens its peers send it."""
        return tuple(sum(shares, Fraction(0)) for shares in self.ranks)

    def rank_tokens(self, assignments: int) -> tuple[tuple[int, ...], ...]:
        """Each rank's experts' tokens, ``ceil(assignments x share)`` each."""
        return tuple(tuple(ceil(assignments * share) for share in shares) for shares in self.ranks)

    def busiest(self, assignments: int) -> tuple[int, ...]:
        """The tokens of each expert of the rank whose experts take the most of ``assignments`` (the first)."""
        return max(self.rank_tokens(assignments), key=sum)


def expert_placements(model: ModelConfig, ep: int) -> tuple[LayerPlacement, ...]:
    """Every mixture-of-experts layer's placement on ``ep`` ranks under ``model.routing`` (even shares without it);
    a routing trace is read here."""
    routing, experts = model.routing, model.experts
    layers = sum(model.moe_layer(index) for index in range(model.layers))
    if routing is None:
        return (place(uniform_shares(experts), ep, 0),) * layers
    if routing.trace is not None:
        shares = read_routing_trace(routing.trace, layers, experts)
    else:
        shares = tuple(zipf_shares(experts, routing.s, routing.seed, layer) for layer in range(layers))
    return tuple(place(layer, ep, routing.redundant_experts) for layer in shares)


def place(shares: Shares, ep: int, redundant: int) -> LayerPlacement:
    """One layer's placement on ``ep`` ranks with ``redundant`` replicas (module docstring)."""
    experts = len(shares)
    if (experts + redundant) % ep:
        raise WorkloadError(
            f"workload.model.routing.redundant_experts: experts plus redundant experts ({experts} + {redundant}) "
            f"must be divisible by the expert-parallel degree ({ep})"
        )
    if not redundant:
        local = experts // ep
        return LayerPlacement(tuple(shares[rank * local : (rank + 1) * local] for rank in range(ep)))
    replicas = eplb_replicas(shares, redundant)
    physical = [shares[e] / replicas[e] for e in range(experts) for _ in range(replicas[e])]
    slots = len(physical) // ep
    packs: list[list[Fraction]] = [[] for _ in range(ep)]
    for share in sorted(physical, reverse=True):  # sorted() is stable: equal loads keep expert order
        open_packs = [rank for rank in range(ep) if len(packs[rank]) < slots]
        rank = min(open_packs, key=lambda q: sum(packs[q], Fraction(0)))
        packs[rank].append(share)
    return LayerPlacement(tuple(tuple(pack) for pack in packs))


def eplb_replicas(shares: Shares, redundant: int) -> tuple[int, ...]:
    """Each expert's replicas after EPLB's ``replicate_experts``: ``redundant`` times, one more replica for the
    expert with the highest share per replica (the first such)."""
    counts = [1] * len(shares)
    for _ in range(redundant):
        hottest = max(range(len(shares)), key=lambda e: shares[e] / counts[e])
        counts[hottest] += 1
    return tuple(counts)
