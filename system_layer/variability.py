"""The ``system.slowdown`` and ``system.variability`` keys: fixed per-NPU slow-downs, seeded random factors on the
NPUs' and operators' compute times, and jitter on every message (see docs/how-to/stragglers.md).

A factor multiplies a compute time: 1 is nominal speed, 1.5 is 50 % slower. Every distribution states its
parameters here and refuses any that could give a factor of zero or less; a draw is made from a numpy
:class:`~numpy.random.Generator` seeded by the study (:func:`generator`), never from global random state, so a
seed gives the same samples in any process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, StrictInt, model_validator

from stratasim.kernel.npu_ids import NpuIds
from stratasim.kernel.schema import Latency, Section, TimePs

__all__ = [
    "FACTOR_FLOOR",
    "FactorDistribution",
    "JitterDistribution",
    "NetworkVariability",
    "NpuIds",
    "Slowdown",
    "SlowdownProfile",
    "Variability",
    "generator",
    "slowdown_profiles",
]

FACTOR_FLOOR = 0.01
"""The least factor a ``normal`` draw gives: the rare draw below it (cv is at most 0.25) is raised to it."""

_MAX_NORMAL_CV = 0.25  # above it a normal factor falls below the floor too often to be a normal any more


class Slowdown(Section):
    """One entry of ``system.slowdown``: the NPUs ``npus`` compute ``factor`` times slower, from ``from`` on."""

    npus: NpuIds
    """The NPUs slowed: ids and ``"a-b"`` ranges, e.g. ``[3]`` or ``[0, "8-15"]``."""
    factor: float = Field(gt=0)
    """What their compute times are multiplied by (above 0: 1.5 is 50 % slower, 0.8 faster)."""
    from_: TimePs = Field(0, alias="from", json_schema_extra={"default": "0ns"})
    """When the slow-down begins: compute nodes starting at or after it are slowed (default: from the start)."""


class _Distribution(Section):
    """A distribution named by ``distribution`` with the parameters its table lists (all others refused)."""

    _parameters: ClassVar[dict[str, tuple[str, ...]]] = {}
    distribution: str
    """Which distribution (subclasses list the names)."""

    @model_validator(mode="after")
    def _parameters_fit(self) -> _Distribution:
        name = self.distribution
        wanted = self._parameters[name]
        given = set(self.model_fields_set) - {"distribution"}
        extra = sorted(given - set(wanted))
        if extra:
            raise ValueError(f"{name} takes {' and '.join(wanted)}, not {', '.join(extra)}")
        missing = [key for key in wanted if key not in given and type(self).model_fields[key].default is None]
        if missing:
            raise ValueError(f"{name} needs {' and '.join(missing)}")
        self._check()
        return self

    def _check(self) -> None:
        """Refuse parameter values that make no sense together (subclasses)."""


class FactorDistribution(_Distribution):
    """A distribution of factors on compute times, all above 0.

    ``constant`` (``value``); ``normal`` (``mean``, default 1, and ``cv``, the standard deviation over the mean, at
    most 0.25; draws below :data:`FACTOR_FLOOR` are raised to it); ``lognormal`` (``median``, default 1, and
    ``sigma`` of the factor's logarithm); ``uniform`` (``low`` to ``high``); ``straggler`` (each draw is ``factor``
    with ``probability``, else 1); ``empirical`` (each draw one of ``values``, alike likely).
    """

    _parameters: ClassVar[dict[str, tuple[str, ...]]] = {
        "constant": ("value",),
        "normal": ("mean", "cv"),
        "lognormal": ("median", "sigma"),
        "uniform": ("low", "high"),
        "straggler": ("probability", "factor"),
        "empirical": ("values",),
    }

    distribution: Literal["constant", "normal", "lognormal", "uniform", "straggler", "empirical"]
    """Which distribution: constant, normal, lognormal, uniform, straggler or empirical."""
    value: float | None = Field(None, gt=0)
    """constant: the factor (above 0)."""
    mean: float = Field(1.0, gt=0)
    """normal: the mean factor."""
    cv: float | None = Field(None, ge=0)
    """normal: the standard deviation over the mean (0 to 0.25; use lognormal for more spread)."""
    median: float = Field(1.0, gt=0)
    """lognormal: the median factor."""
    sigma: float | None = Field(None, ge=0, le=3)
    """lognormal: the standard deviation of the factor's natural logarithm (0 to 3)."""
    low: float | None = Field(None, gt=0)
    """uniform: the least factor (above 0)."""
    high: float | None = Field(None, gt=0)
    """uniform: the greatest factor."""
    probability: float | None = Field(None, ge=0, le=1)
    """straggler: the chance that a draw is slowed (0 to 1)."""
    factor: float | None = Field(None, gt=0)
    """straggler: the factor of a slowed draw (above 0)."""
    values: tuple[float, ...] | None = Field(None, min_length=1)
    """empirical: the factors to draw from, alike likely (each above 0)."""

    def _check(self) -> None:
        if self.cv is not None and self.cv > _MAX_NORMAL_CV:
            raise ValueError(
                f"normal: a cv of {self.cv} draws factors at or below 0 too often (at most {_MAX_NORMAL_CV}); "
                "use lognormal (sigma) for a wider spread"
            )
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"uniform: low ({self.low}) is above high ({self.high})")
        if self.values is not None and not all(math.isfinite(v) and v > 0 for v in self.values):
            raise ValueError(f"empirical: every value is a factor above 0, got {list(self.values)}")

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` factors drawn from ``rng``, as float64 (exactly the parameter for a zero-spread one)."""
        kind = self.distribution
        if kind == "constant":
            return np.full(count, self.value, dtype=np.float64)
        if kind == "normal":
            assert self.cv is not None
            return np.maximum(self.mean * (1.0 + self.cv * rng.standard_normal(count)), FACTOR_FLOOR)
        if kind == "lognormal":
            assert self.sigma is not None
            return self.median * np.exp(self.sigma * rng.standard_normal(count))
        if kind == "uniform":
            assert self.low is not None and self.high is not None
            return self.low + (self.high - self.low) * rng.random(count)
        if kind == "straggler":
            assert self.probability is not None and self.factor is not None
            return np.where(rng.random(count) < self.probability, self.factor, 1.0)
        assert self.values is not None
        return np.asarray(self.values, dtype=np.float64)[rng.integers(0, len(self.values), count)]


class JitterDistribution(_Distribution):
    """A distribution of extra delays on messages, each at least 0: ``constant`` (``value``), ``exponential``
    (``mean``) or ``uniform`` (``low`` to ``high``)."""

    _parameters: ClassVar[dict[str, tuple[str, ...]]] = {
        "constant": ("value",),
        "exponential": ("mean",),
        "uniform": ("low", "high"),
    }

    distribution: Literal["constant", "exponential", "uniform"]
    """Which distribution: constant, exponential or uniform."""
    value: Latency | None = None
    """constant: the delay every message gets."""
    mean: Latency | None = None
    """exponential: the mean delay."""
    low: Latency | None = None
    """uniform: the least delay."""
    high: Latency | None = None
    """uniform: the greatest delay."""

    def _check(self) -> None:
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"uniform: low ({self.low} ps) is above high ({self.high} ps)")

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` delays in whole picoseconds (int64) drawn from ``rng``."""
        kind = self.distribution
        if kind == "constant":
            return np.full(count, self.value, dtype=np.int64)
        if kind == "exponential":
            assert self.mean is not None
            return np.rint(rng.exponential(self.mean, count)).astype(np.int64)
        assert self.low is not None and self.high is not None
        return rng.integers(self.low, self.high, count, endpoint=True, dtype=np.int64)


class NetworkVariability(Section):
    """``system.variability.network``: what varies on the network."""

    jitter: JitterDistribution
    """An extra delay before each message is sent, drawn per message."""


class Variability(Section):
    """``system.variability``: seeded random compute factors and message jitter, and Monte-Carlo samples.

    ``npu`` draws one factor per NPU per sample; ``operator`` one per compute node run; ``network.jitter`` one
    delay per message. Sample ``k`` (from 0) draws with seed ``seed + k``.
    """

    seed: StrictInt = Field(0, ge=0)
    """The seed of the first sample; sample k uses seed + k."""
    npu: FactorDistribution | None = None
    """One factor per NPU per sample on all of its compute times."""
    operator: FactorDistribution | None = None
    """One factor per compute node run, drawn independently."""
    network: NetworkVariability | None = None
    """Jitter on messages."""
    samples: StrictInt = Field(1, ge=1, le=100_000)
    """Monte-Carlo samples to run (``stratasim run --samples N`` overrides)."""


def generator(seed: int, stream: int, npu: int = 0) -> np.random.Generator:
    """The numpy generator of one stream of draws (0: NPU factors, 1: operators, 2: jitter) of a sample seeded
    ``seed``, for ``npu``: independent streams, the same in every process."""
    return np.random.default_rng([seed, stream, npu])


SlowdownProfile = tuple[float, tuple[tuple[int, float], ...]]
"""One NPU's fixed slow-down: the factor on all its compute, and the (from in ps, factor) pairs beginning later."""


def slowdown_profiles(entries: Sequence[Slowdown], npus: int) -> dict[int, SlowdownProfile]:
    """The fixed slow-down of each NPU below ``npus`` that some entry names (the others run at nominal speed):
    the product of its entries' factors from the start, and its later entries' (from, factor) in their order."""
    factors: dict[int, float] = {}
    later: dict[int, list[tuple[int, float]]] = {}
    for entry in entries:
        for npu in entry.npus:
            if npu >= npus:
                continue  # the topology's NPUs beyond the workload's
            factors.setdefault(npu, 1.0)
            later.setdefault(npu, [])
            if entry.from_:
                later[npu].append((entry.from_, entry.factor))
            else:
                factors[npu] *= entry.factor
    return {npu: (factor, tuple(later[npu])) for npu, factor in factors.items()}


def slowdown_problems(entries: Sequence[Slowdown], npus: int) -> list[str]:
    """The entries naming an NPU the topology does not have."""
    return [
        f"entry {i} names NPU {max(entry.npus)} but the topology has {npus} NPUs (0-{npus - 1})"
        for i, entry in enumerate(entries)
        if max(entry.npus) >= npus
    ]
