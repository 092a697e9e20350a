"""The requests a serving study runs: drawn from a seeded arrival process and length distributions, or read
from a trace file (:mod:`stratasim.workload_layer.serving.trace_file`).

Every drawn arrival lies within :data:`ARRIVAL_LIMIT_PS` (checked on the drawn gaps before any conversion to
integers). Draws use numpy's PCG64 generator seeded with ``requests.seed``, the gaps first and then prompts and outputs, so a
seed gives the same requests bit for bit on any machine. Arrival times are integer picoseconds, the first
request arriving at the first gap (a Poisson process observed from time 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.config import (
    ARRIVAL_LIMIT_PS,
    MAX_REQUESTS,
    ArrivalConfig,
    EmpiricalLength,
    FixedLength,
    LengthDistribution,
    LognormalLength,
    RequestsConfig,
    UniformLength,
    horizon_said,
)

__all__ = ["ARRIVAL_LIMIT_PS", "MAX_REQUESTS", "Request", "horizon_said", "synthetic_requests"]

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
    """``config.count`` requests from ``config.arrival`` with lengths from ``config.prompt`` and ``config.output``."""
    assert config.count is not None and config.arrival is not None  # the schema requires them without a trace
    assert config.prompt is not None and config.output is not None
    generator = np.random.Generator(np.random.PCG64(config.seed))
    gaps = _gaps(generator, config.arrival, config.count)
    if not float(np.sum(gaps)) * PS_PER_SECOND <= ARRIVAL_LIMIT_PS:  # before any conversion to int64
        raise WorkloadError(
            f"workload.requests.arrival: the {config.count:,} requests drawn at {config.arrival.rate:.3g}/s arrive "
            f"over {float(np.sum(gaps)):.3g} s, beyond {horizon_said()}; raise arrival.rate or lower count"
        )
    arrivals = np.cumsum(np.round(gaps * PS_PER_SECOND).astype(np.int64))
    prompts = _lengths(generator, config.prompt, config.count)
    outputs = _lengths(generator, config.output, config.count)
    return tuple(Request(i, int(t), int(p), int(o)) for i, (t, p, o) in enumerate(zip(arrivals, prompts, outputs)))


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
