"""The requests a serving study runs: drawn from a seeded arrival process and length distributions, or read
from a trace file (:mod:`stratasim.workload_layer.serving.trace_file`).

Every drawn arrival lies within :data:`ARRIVAL_LIMIT_PS` (checked on the drawn gaps before any conversion to
integers). Draws use numpy's PCG64 generator seeded with ``requests.seed``, the gaps first and then prompts and outputs, so a
seed gives the same requests bit for bit on any machine. Arrival times are integer picoseconds, the first
request arriving at the first gap (a Poisson process observed from time 0).

Sessions (``requests.sessions``) draw, in this order, each session's start (the gaps), its turns, every turn's
new prompt tokens and output tokens, and every later turn's think time. A session's turns are consecutive
requests, sessions in order of their starts: its first turn arrives at the start, each later one ``follows`` the
one before and arrives its ``think_ps`` after that one's last token (the run sets when); turn ``t + 1``'s prompt
is turn ``t``'s prompt and output and its own new tokens. With ``requests.shared_prefix`` each request (each
session) then draws one of ``groups`` prefixes uniformly; its prompt (its first turn's, which the later ones
extend) starts with the prefix's ``tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.request_config import (
    ARRIVAL_LIMIT_PS,
    ArrivalConfig,
    EmpiricalLength,
    FixedLength,
    LengthDistribution,
    LognormalLength,
    RequestsConfig,
    SessionsConfig,
    UniformLength,
    horizon_said,
)
from stratasim.workload_layer.serving.session_config import FixedThink, LognormalThink, ThinkDistribution

__all__ = ["Request", "synthetic_requests"]

PS_PER_SECOND = 10**12


@dataclass(frozen=True)
class Request:
    """One request: when it arrives (ps), its prompt tokens and the tokens it generates (the first from the
    prefill); ``index`` is its place in the run's requests.

    What its prompt holds, for a prefix cache: the first ``shared_tokens`` are a prefix shared by every request
    naming the same ``shared_prefix`` (a system prompt; -1 none), and the prompt is the start of its ``session``'s
    token stream (a conversation or agent loop; -1 none): a later turn's prompt is the earlier turns' prompts and
    outputs and its new tokens, so two requests of one session hold the same tokens up to the shorter prompt. A
    request that ``follows`` another (its session's previous turn; -1 none) arrives ``think_ps`` after that one
    finishes; its ``arrival_ps`` is then unknown until the run (-1)."""

    index: int
    arrival_ps: int
    prompt_tokens: int
    output_tokens: int
    session: int = -1
    turn: int = 0
    shared_prefix: int = -1
    shared_tokens: int = 0
    follows: int = -1
    think_ps: int = 0


def synthetic_requests(config: RequestsConfig) -> tuple[Request, ...]:
    """``config.count`` requests from ``config.arrival`` with lengths from ``config.prompt`` and ``config.output``,
    or the turns of ``config.sessions`` (module docstring)."""
    assert config.arrival is not None  # the schema requires it without a trace
    generator = np.random.Generator(np.random.PCG64(config.seed))
    if config.sessions is not None:
        return _session_requests(generator, config, config.sessions)
    assert config.count is not None and config.prompt is not None and config.output is not None
    arrivals = _arrivals(generator, config.arrival, config.count, "requests")
    prompts = _lengths(generator, config.prompt, config.count)
    outputs = _lengths(generator, config.output, config.count)
    if config.shared_prefix is None:
        return tuple(Request(i, int(t), int(p), int(o)) for i, (t, p, o) in enumerate(zip(arrivals, prompts, outputs)))
    tokens = config.shared_prefix.tokens
    groups = generator.integers(0, config.shared_prefix.groups, config.count)
    return tuple(
        Request(i, int(t), int(p) + tokens, int(o), shared_prefix=int(g), shared_tokens=tokens)
        for i, (t, p, o, g) in enumerate(zip(arrivals, prompts, outputs, groups))
    )


def _session_requests(
    generator: np.random.Generator, config: RequestsConfig, sessions: SessionsConfig
) -> tuple[Request, ...]:
    """Every turn of ``sessions``, session by session (module docstring)."""
    assert config.arrival is not None
    starts = _arrivals(generator, config.arrival, sessions.count, "sessions")
    turns = _lengths(generator, sessions.turns, sessions.count)
    total = int(turns.sum())
    new = _lengths(generator, sessions.new_prompt, total)
    outputs = _lengths(generator, sessions.output, total)
    firsts = np.concatenate(([0], np.cumsum(turns)[:-1]))
    later = np.ones(total, dtype=bool)
    later[firsts] = False
    thinks = np.zeros(total, dtype=np.int64)
    thinks[later] = _thinks(generator, sessions.think, total - sessions.count)
    prefix = config.shared_prefix
    groups = generator.integers(0, prefix.groups, sessions.count) if prefix is not None else np.full(sessions.count, -1)
    shared = prefix.tokens if prefix is not None else 0
    added = new.copy()  # each turn's prompt grows by the previous output and its new tokens
    added[1:] += outputs[:-1]
    added[firsts] = new[firsts] + shared
    grown = np.cumsum(added)
    prompts = grown - np.repeat(grown[firsts] - added[firsts], turns)
    session = np.repeat(np.arange(sessions.count), turns)
    turn = np.arange(total) - np.repeat(firsts, turns)
    return tuple(
        Request(
            i,
            int(starts[s]) if t == 0 else -1,
            int(p),
            int(o),
            int(s),
            int(t),
            int(groups[s]),
            shared,
            i - 1 if t else -1,
            int(k),
        )
        for i, (s, t, p, o, k) in enumerate(zip(session, turn, prompts, outputs, thinks))
    )


def _arrivals(generator: np.random.Generator, arrival: ArrivalConfig, count: int, what: str) -> np.ndarray:
    """``count`` arrival times (ps) from ``arrival``; an error naming ``what`` arrives beyond the horizon."""
    gaps = _gaps(generator, arrival, count)
    if not float(np.sum(gaps)) * PS_PER_SECOND <= ARRIVAL_LIMIT_PS:  # before any conversion to int64
        raise WorkloadError(
            f"workload.requests.arrival: the {count:,} {what} drawn at {arrival.rate:.3g}/s arrive "
            f"over {float(np.sum(gaps)):.3g} s, beyond {horizon_said()}; raise arrival.rate or lower count"
        )
    return np.cumsum(np.round(gaps * PS_PER_SECOND).astype(np.int64))


def _thinks(generator: np.random.Generator, think: ThinkDistribution, count: int) -> np.ndarray:
    """``count`` think times (ps) drawn from ``think``, rounded to the picosecond."""
    if isinstance(think, FixedThink):
        return np.full(count, think.value, dtype=np.int64)
    if isinstance(think, LognormalThink):
        draws = think.median * np.exp(think.sigma * generator.standard_normal(count))
        return np.round(np.minimum(draws, think.max)).astype(np.int64)
    return np.round(generator.exponential(think.mean, count)).astype(np.int64)


def _gaps(generator: np.random.Generator, arrival: ArrivalConfig, count: int) -> np.ndarray:
    """Seconds between consecutive arrivals: exponential (Poisson), gamma of shape ``1 / cv^2`` and mean ``1 /
    rate`` (so its coefficient of variation is ``cv``), or all ``1 / rate``."""
    mean = 1.0 / arrival.rate
    if arrival.process == "poisson":
        return generator.exponential(mean, count)
    if arrival.process == "gamma":
        assert arrival.cv is not None
        shape = 1.0 / arrival.cv**2
        return generator.gamma(shape, mean / shape, count)
    return np.full(count, mean)


def _lengths(generator: np.random.Generator, distribution: LengthDistribution, count: int) -> np.ndarray:
    """``count`` token counts drawn from ``distribution``."""
    if isinstance(distribution, FixedLength):
        return np.full(count, distribution.value, dtype=np.int64)
    if isinstance(distribution, UniformLength):
        return generator.integers(distribution.low, distribution.high, count, endpoint=True)
    if isinstance(distribution, LognormalLength):
        draws = np.round(distribution.median * np.exp(distribution.sigma * generator.standard_normal(count)))
        return np.clip(draws, 1, distribution.max).astype(np.int64)
    assert isinstance(distribution, EmpiricalLength)
    tokens = np.array([point[0] for point in distribution.points], dtype=np.float64)
    cdf = np.array([point[1] for point in distribution.points])
    if cdf[0] > 0:  # below the first point's probability, every draw is the first point's tokens
        tokens, cdf = np.concatenate(([tokens[0]], tokens)), np.concatenate(([0.0], cdf))
    return np.ceil(np.interp(generator.random(count), cdf, tokens)).astype(np.int64).clip(1)
