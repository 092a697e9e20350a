"""The keys of drawn sessions' think times and of shared prompt prefixes (``workload.requests.sessions.think``,
``workload.requests.shared_prefix``), validated.

A think time is the pause between a turn's last token and the next turn's arrival: a user reading and typing, or an
agent's tool call. It is drawn per turn from ``fixed``, ``exponential`` or ``lognormal``, each written as a time
(``5s``, ``800ms``) of at most an hour.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from stratasim.kernel.plausible import Usual
from stratasim.kernel.schema import Section, TimePs

__all__ = ["ExponentialThink", "FixedThink", "LognormalThink", "SharedPrefixConfig", "ThinkDistribution", "ThinkTime"]

ThinkTime = Annotated[TimePs, Usual("time", "a think or tool time", 0, 3600 * 10**12)]
"""A think time in picoseconds (``5s``, ``800ms``), at most an hour."""


class FixedThink(Section):
    """Every turn waits ``value``."""

    distribution: Literal["fixed"]
    """``fixed``."""
    value: ThinkTime
    """The think time (``5s``; ``0s``: the next turn arrives as the previous one finishes)."""


class ExponentialThink(Section):
    """Think times exponential of mean ``mean`` (memoryless users), rounded to the picosecond."""

    distribution: Literal["exponential"]
    """``exponential``."""
    mean: ThinkTime = Field(gt=0)
    """The mean think time (``10s``)."""


class LognormalThink(Section):
    """Think times ``median * exp(sigma * Z)`` for a standard normal ``Z``, rounded to the picosecond and cut at
    ``max`` (a long tail of slow replies, as measured chat think times have)."""

    distribution: Literal["lognormal"]
    """``lognormal``."""
    median: ThinkTime = Field(gt=0)
    """The median think time (``8s``)."""
    sigma: float = Field(ge=0, le=10)
    """Standard deviation of the think time's natural logarithm."""
    max: ThinkTime = Field(gt=0)
    """Longest think time: longer draws become ``max``."""


ThinkDistribution = Annotated[FixedThink | ExponentialThink | LognormalThink, Field(discriminator="distribution")]
"""A think-time distribution: ``fixed``, ``exponential`` or ``lognormal``."""


class SharedPrefixConfig(Section):
    """``workload.requests.shared_prefix``: ``groups`` shared prompts (system prompts) of ``tokens`` tokens each;
    every drawn request (every session, with ``sessions``) starts with one of them, drawn uniformly (seeded), its
    prompt (its first turn's) ``tokens`` longer for it."""

    tokens: int = Field(gt=0, le=1 << 24)
    """Tokens of each shared prefix, added to the prompt (a session's first turn; later turns carry it)."""
    groups: int = Field(default=1, ge=1, le=1 << 20)
    """Distinct shared prefixes the requests (sessions) are spread over."""
