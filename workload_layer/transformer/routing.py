"""``workload.model.routing``: how a mixture of experts routes its tokens, as each expert's share of them per
mixture-of-experts layer.

Without the key (or with ``s: 0``) every expert takes an even share, as StrataSim always assumed. ``skew: zipf``
draws a Zipf-like load: the ``k``-th busiest expert of a layer (``k`` from 1) takes a share proportional to
``k^-s``, and which expert is the ``k``-th busiest is a seeded shuffle, one per layer (``seed``), so that the hot
experts of different layers land on different ranks. ``trace`` reads measured loads instead (tokens or shares per
expert and layer, :mod:`stratasim.workload_layer.transformer.routing_trace`). ``redundant_experts`` adds EPLB's
replicas of the hottest experts (:mod:`stratasim.workload_layer.transformer.expert_placement`).

Shares are exact fractions (a Zipf weight is rounded to a multiple of 10^-12 first), so that uniform routing gives
every expert exactly ``1 / experts`` and the figures of a study without the key, bit for bit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import ClassVar, Literal, TypeVar

from pydantic import Field, PrivateAttr, model_validator

from stratasim.kernel.schema import Section

__all__ = ["RoutingConfig", "Shares", "zipf_shares", "uniform_shares"]

Shares = tuple[Fraction, ...]
"""Each expert's share of a layer's routed tokens (token-to-expert assignments), summing to 1."""

_ZIPF_SCALE = 10**12
"""Zipf weights are rounded to multiples of ``1 / _ZIPF_SCALE`` so that shares are exact fractions."""


_T = TypeVar("_T")


class _Derived(dict[Hashable, object]):
    """Values derived from a configuration, kept with it: equal to any other, so that two configurations of the
    same keys stay equal whatever each has derived so far."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Derived)

    __hash__ = None  # type: ignore[assignment]


class RoutingConfig(Section):
    """``workload.model.routing``: each expert's share of a layer's tokens, from a Zipf-like skew (``skew: zipf``
    with exponent ``s`` and a ``seed``) or from a routing ``trace`` (a CSV file, relative to the study file's
    folder); ``redundant_experts`` extra expert replicas placed by EPLB's greedy policy; ``pad_to_capacity`` whether a
    training step's experts compute their padded capacity or the tokens routed to them."""

    study_files: ClassVar[tuple[str, ...]] = ("trace",)
    skew: Literal["zipf"] | None = None
    """A skew distribution: ``zipf``, the ``k``-th busiest expert's share proportional to ``k^-s``."""
    s: float = Field(default=0.0, ge=0, le=16)
    """The Zipf exponent: 0 is uniform routing, larger concentrates the tokens on fewer experts."""
    seed: int = Field(default=0, ge=0)
    """Seed of the shuffle that picks each layer's busiest experts."""
    trace: str | None = Field(default=None, min_length=1)
    """A routing trace: ``layer,expert,tokens`` rows, one per expert of each mixture-of-experts layer."""
    redundant_experts: int = Field(default=0, ge=0)
    """Extra expert replicas (DeepSeek's EPLB): the hottest experts get replicas that share their load."""
    pad_to_capacity: bool = True
    """Training: every expert computes its whole capacity, padding included (GShard's static shapes, as without
    routing); false computes only the tokens routed to it, up to the capacity (Megatron-core's default)."""

    _derived: _Derived = PrivateAttr(default_factory=_Derived)

    def derived(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """What ``compute`` derives from this routing (a trace read, placements made), computed once per ``key``
        for the life of this configuration."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]  # type: ignore[return-value]

    @model_validator(mode="after")
    def _one_source(self) -> RoutingConfig:
        if (self.skew is None) == (self.trace is None):
            raise ValueError("give one of routing.skew (zipf) or routing.trace (a CSV file)")
        stray = [key for key in ("s", "seed") if key in self.model_fields_set and self.skew is None]
        if stray:
            raise ValueError(f"routing.{stray[0]} applies to routing.skew only")
        return self


def uniform_shares(experts: int) -> Shares:
    """Every one of ``experts`` experts taking ``1 / experts``."""
    return (Fraction(1, experts),) * experts


def zipf_shares(experts: int, s: float, seed: int, layer: int) -> Shares:
    """The shares of MoE layer ``layer`` (counted among the mixture-of-experts layers) under a Zipf law of exponent
    ``s``: the ``k``-th busiest expert's weight ``k^-s`` (rounded to 10^-12), the experts ranked by a shuffle seeded
    with ``seed`` and ``layer``."""
    if s == 0:
        return uniform_shares(experts)
    weights = [round(_ZIPF_SCALE * (rank + 1) ** -s) or 1 for rank in range(experts)]
    order = list(range(experts))
    random.Random(f"{seed}/{layer}").shuffle(order)
    by_expert = [0] * experts
    for rank, expert in enumerate(order):
        by_expert[expert] = weights[rank]
    total = sum(weights)
    return tuple(Fraction(weight, total) for weight in by_expert)
