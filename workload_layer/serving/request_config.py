"""``workload.requests``: what a serving study is asked, validated: drawn requests (an arrival process and length
distributions), multi-turn sessions, shared prefixes, or a trace file; and the request rate's notation.

:mod:`stratasim.workload_layer.serving.requests` draws the requests these keys describe, and
:mod:`~stratasim.workload_layer.serving.trace_file` and :mod:`~stratasim.workload_layer.serving.session_trace` read
the traces.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, ClassVar, Literal

from pydantic import BeforeValidator, Field, model_validator

from stratasim.kernel import units
from stratasim.kernel.schema import Section, quantity, written
from stratasim.workload_layer.serving.session_config import SharedPrefixConfig, ThinkDistribution

__all__ = [
    "RequestsConfig",
    "SessionsConfig",
    "ArrivalConfig",
    "TraceConfig",
    "LengthDistribution",
    "FixedLength",
    "UniformLength",
    "LognormalLength",
    "EmpiricalLength",
    "Rate",
    "parse_rate",
    "ARRIVAL_LIMIT_PS",
    "MAX_REQUESTS",
    "horizon_said",
]

ARRIVAL_LIMIT_PS = 1 << 62
"""The latest a request may arrive (ps after the first, or after 0): 2^62 ps, about 53 days, half the int64
picoseconds of the simulator's time, leaving the other half to serve the requests."""
MAX_REQUESTS = 10_000_000
"""Most requests a study serves, drawn or read."""
MIN_RATE = Fraction(1, 10**6)
"""The lowest request rate, per second (one in some 11.6 days)."""


def horizon_said() -> str:
    """The arrival horizon as a message says it."""
    return f"the simulator's horizon: arrivals within 2^62 ps ({ARRIVAL_LIMIT_PS // 10**12:,} s, about 53 days)"


_RATE = re.compile(r"^\s*(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*/\s*(?P<unit>[a-z]+)\s*$")
_PER_SECOND: dict[str, Fraction] = {
    "s": Fraction(1),
    "min": Fraction(1, 60),
    "h": Fraction(1, 3600),
    "ms": Fraction(1000),
}


def parse_rate(value: object) -> float:
    """Read a request rate (``20/s``, ``1200/min``, ``0.5/ms``) as requests per second; from 10^-6/s to 10^6/s."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a rate such as 20/s or 1200/min, got {value!r}")
    match = _RATE.match(value) if isinstance(value, str) else None
    if match is None:
        if isinstance(value, (int, float)) or re.fullmatch(r"\s*[-+0-9.eE]+\s*", value):
            raise ValueError(units.no_unit(value, "20/s or 1200/min", "/s"))
        raise ValueError(f"cannot read {value!r} as a rate; write it like 20/s or 1200/min")
    scale = _PER_SECOND.get(match["unit"])
    if scale is None:
        raise ValueError(f"unknown rate unit /{match['unit']} in {value!r}; use /s, /ms, /min or /h")
    rate = Fraction(match["num"]) * scale
    if rate <= 0:
        raise ValueError(f"a request rate must be positive: {value!r}")
    if not MIN_RATE <= rate <= 10**6:
        raise ValueError(f"{value!r} is outside the plausible range of a request rate: 10^-6/s to 10^6/s")
    return float(rate)


Rate = Annotated[float, BeforeValidator(parse_rate), quantity("request rate, positive", "20/s"), written("/s")]
"""Requests per second (accepts ``20/s``, ``1200/min``)."""


class FixedLength(Section):
    """Every request has ``value`` tokens."""

    distribution: Literal["fixed"]
    """``fixed``."""
    value: int = Field(gt=0)
    """Tokens."""

    @property
    def largest(self) -> int:
        """The most tokens a request can have."""
        return self.value


class UniformLength(Section):
    """Tokens uniform over the integers ``low .. high``."""

    distribution: Literal["uniform"]
    """``uniform``."""
    low: int = Field(gt=0)
    """Fewest tokens."""
    high: int = Field(gt=0)
    """Most tokens."""

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must be at most high ({self.high})")
        return self

    @property
    def largest(self) -> int:
        """The most tokens a request can have."""
        return self.high


class LognormalLength(Section):
    """Tokens ``round(median * exp(sigma * Z))`` for a standard normal ``Z``, kept within ``[1, max]`` (a real
    server's prompts are bounded by its context, so the tail is cut, not redrawn)."""

    distribution: Literal["lognormal"]
    """``lognormal``."""
    median: float = Field(gt=0)
    """The median, in tokens."""
    sigma: float = Field(ge=0, le=10)
    """Standard deviation of the tokens' natural logarithm."""
    max: int = Field(gt=0)
    """Most tokens: larger draws become ``max``."""

    @property
    def largest(self) -> int:
        """The most tokens a request can have."""
        return self.max


class EmpiricalLength(Section):
    """An empirical CDF: ``points`` are ``[tokens, cumulative probability]`` pairs, both increasing, the last at
    probability 1; a draw interpolates linearly between them (inverse-CDF sampling) and rounds up."""

    distribution: Literal["empirical"]
    """``empirical``."""
    points: tuple[tuple[int, float], ...] = Field(min_length=1)
    """``[tokens, cumulative probability]`` pairs, increasing, ending at probability 1."""

    @model_validator(mode="after")
    def _a_cdf(self) -> EmpiricalLength:
        tokens = [point[0] for point in self.points]
        cdf = [point[1] for point in self.points]
        if tokens[0] < 1:
            raise ValueError(f"points: tokens must be at least 1, got {tokens[0]}")
        if any(b <= a for a, b in zip(tokens, tokens[1:])) or any(b <= a for a, b in zip(cdf, cdf[1:])):
            raise ValueError("points: tokens and cumulative probabilities must both increase strictly")
        if not 0 <= cdf[0] <= 1 or cdf[-1] != 1:
            raise ValueError(f"points: cumulative probabilities lie in [0, 1] and the last is 1, got {cdf[-1]}")
        return self

    @property
    def largest(self) -> int:
        """The most tokens a request can have."""
        return self.points[-1][0]


LengthDistribution = Annotated[
    FixedLength | UniformLength | LognormalLength | EmpiricalLength, Field(discriminator="distribution")
]
"""A token-count distribution: ``fixed``, ``uniform``, ``lognormal`` or ``empirical``."""


class ArrivalConfig(Section):
    """``requests.arrival``: ``poisson`` (exponential gaps), ``gamma`` (gamma gaps of coefficient of variation
    ``cv``: above 1 burstier than Poisson, 1 Poisson, below 1 smoother) or ``fixed`` (one every ``1 / rate``),
    all at ``rate`` on average."""

    process: Literal["poisson", "gamma", "fixed"]
    """``poisson``, ``gamma`` or ``fixed``."""
    rate: Rate
    """Mean arrival rate (``20/s``)."""
    cv: float | None = Field(default=None, gt=0, le=100)
    """``gamma`` only: the coefficient of variation of the gaps between arrivals (burstiness)."""

    @model_validator(mode="after")
    def _cv(self) -> ArrivalConfig:
        if (self.process == "gamma") != (self.cv is not None):
            raise ValueError("cv is required by process: gamma and applies to it only")
        return self


class TraceConfig(Section):
    """``requests.trace``: requests replayed from a CSV or JSONL file (relative to the study file's folder): Azure's public LLM inference trace (``TIMESTAMP,ContextTokens,GeneratedTokens``, arrival times from
    the first timestamp) or a plain one (``arrival_s`` or ``arrival_ms``, ``prompt_tokens``, ``output_tokens``),
    recognised by their header (a JSONL line's keys)."""

    study_files: ClassVar[tuple[str, ...]] = ("path",)
    path: str = Field(min_length=1)
    """The trace file."""
    limit: int | None = Field(default=None, gt=0)
    """Replay only the first ``limit`` requests."""


class SessionsConfig(Section):
    """``requests.sessions``: ``count`` conversations or agent loops, each starting at a draw of ``requests.arrival``
    and running ``turns`` turns; a later turn arrives ``think`` after the previous one's last token, its prompt
    the previous prompt and output plus ``new_prompt`` tokens (:mod:`stratasim.workload_layer.serving.requests`)."""

    count: int = Field(gt=0, le=MAX_REQUESTS)
    """Sessions to generate."""
    turns: LengthDistribution
    """Turns of a session (at least one), a length distribution counting turns."""
    think: ThinkDistribution
    """Time between a turn's last token and the next turn's arrival."""
    new_prompt: LengthDistribution
    """Tokens a turn adds to the conversation's prompt (a first turn's whole prompt, besides any shared prefix)."""
    output: LengthDistribution
    """Tokens a turn generates (the first from the prefill)."""

    @model_validator(mode="after")
    def _bounded(self) -> SessionsConfig:
        if self.count * self.turns.largest > MAX_REQUESTS:
            raise ValueError(
                f"count ({self.count:,}) sessions of up to {self.turns.largest:,} turns make up to "
                f"{self.count * self.turns.largest:,} requests, beyond the {MAX_REQUESTS:,} a study serves"
            )
        return self


class RequestsConfig(Section):
    """``workload.requests``: ``count`` requests from ``arrival`` with ``prompt`` and ``output`` lengths drawn
    with ``seed``, or ``sessions`` of several turns starting at ``arrival``, either optionally starting with a
    ``shared_prefix``; or those of ``trace``."""

    count: int | None = Field(default=None, gt=0, le=MAX_REQUESTS)
    """Requests to generate."""
    seed: int = Field(default=0, ge=0)
    """Seed of the arrival and length draws: the same seed, the same requests."""
    arrival: ArrivalConfig | None = None
    """The arrival process."""
    prompt: LengthDistribution | None = None
    """Prompt tokens of a request."""
    output: LengthDistribution | None = None
    """Tokens a request generates (the first from the prefill)."""
    sessions: SessionsConfig | None = None
    """Multi-turn sessions (conversations, agent loops) instead of ``count``, ``prompt`` and ``output``."""
    shared_prefix: SharedPrefixConfig | None = None
    """Shared prompt prefixes (system prompts) the drawn requests or sessions start with."""
    trace: TraceConfig | None = None
    """A request-trace file instead of the keys above (its own columns may name sessions and prefixes)."""

    @model_validator(mode="after")
    def _one_source(self) -> RequestsConfig:
        synthetic = {"count": self.count, "arrival": self.arrival, "prompt": self.prompt, "output": self.output}
        drawn = {**synthetic, "sessions": self.sessions, "shared_prefix": self.shared_prefix}
        if self.trace is not None:
            given = [key for key, value in drawn.items() if value is not None]
            if given:
                raise ValueError(f"give either trace or {', '.join(synthetic)}, not both (found {given[0]})")
        elif self.sessions is not None:
            given = [key for key in ("count", "prompt", "output") if synthetic[key] is not None]
            if given:
                raise ValueError(f"{given[0]} is drawn per turn by sessions (sessions.count, .new_prompt, .output)")
            if self.arrival is None:
                raise ValueError("arrival is required: the sessions' first turns arrive by it")
        else:
            missing = [key for key, value in synthetic.items() if value is None]
            if missing:
                raise ValueError(f"{missing[0]} is required (or give sessions or a trace)")
        return self

    @model_validator(mode="after")
    def _within_horizon(self) -> RequestsConfig:
        count, what = (self.sessions.count, "sessions") if self.sessions is not None else (self.count, "requests")
        if count is not None and self.arrival is not None and count / self.arrival.rate > ARRIVAL_LIMIT_PS / 1e12:
            raise ValueError(
                f"arrival.rate: {count:,} {what} at {self.arrival.rate:.3g}/s arrive over some "
                f"{count / self.arrival.rate:.3g} s, beyond {horizon_said()}; raise the rate or lower count"
            )
        return self

    @property
    def most_requests(self) -> int | None:
        """The most requests the drawn keys make (a session's every turn one), None for a trace."""
        if self.sessions is not None:
            return self.sessions.count * self.sessions.turns.largest
        return self.count

    @property
    def longest_output(self) -> int | None:
        """The most tokens a drawn request generates, None for a trace."""
        output = self.sessions.output if self.sessions is not None else self.output
        return None if output is None else output.largest
