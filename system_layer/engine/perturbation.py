"""One sample's slow-downs and variability, as the engine applies them: a :class:`ComputeSpeed` per NPU that turns a
compute node's nominal duration into its duration on that NPU, and a :class:`Jitter` giving each message's delay.

A compute node's duration is its nominal one times the NPU's factor (its fixed ``system.slowdown`` entries, those
begun by the node's start, times its ``variability.npu`` draw) times, with ``variability.operator``, one draw per
node run; rounded to the nearest picosecond. Draws are made in the order the (deterministic) event loop asks for
them, from generators seeded by the sample (:func:`stratasim.system_layer.variability.generator`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.variability import FactorDistribution, JitterDistribution, generator, slowdown_profiles

__all__ = ["ComputeSpeed", "Jitter", "Perturbation"]

_BATCH = 1024  # draws taken from a generator at once


class _Draws:
    """An endless stream of draws from ``distribution``, taken from ``rng`` a batch at a time."""

    def __init__(self, distribution: FactorDistribution | JitterDistribution, rng: np.random.Generator) -> None:
        self._distribution = distribution
        self._rng = rng
        self._batch: list[float] = []
        self._next = 0

    def next(self) -> float:
        if self._next == len(self._batch):
            self._batch = self._distribution.draw(self._rng, _BATCH).tolist()
            self._next = 0
        value = self._batch[self._next]
        self._next += 1
        return value


class ComputeSpeed:
    """How one NPU computes in one sample: ``factor`` on every node, times each of ``later`` (from, factor) from
    its time on, times one draw of ``noise`` per node."""

    def __init__(self, factor: float, later: tuple[tuple[int, float], ...], noise: _Draws | None) -> None:
        self.factor = factor
        self._later = later
        self._noise = noise

    def duration(self, nominal_ps: int, now_ps: int) -> int:
        """The duration on this NPU of a compute node of ``nominal_ps`` starting at ``now_ps``."""
        factor = self.factor
        for start, extra in self._later:
            if now_ps >= start:
                factor *= extra
        if self._noise is not None:
            factor *= self._noise.next()
        return nominal_ps if factor == 1.0 else int(nominal_ps * factor + 0.5)


class Jitter:
    """The extra delay of each message sent, in ps, drawn in send order."""

    def __init__(self, distribution: JitterDistribution, rng: np.random.Generator) -> None:
        self._draws = _Draws(distribution, rng)

    def __call__(self) -> int:
        return int(self._draws.next())


@dataclass(frozen=True)
class Perturbation:
    """What one sample (numbered from 0) of a study's ``slowdown`` and ``variability`` does: each NPU's speed and
    the messages' jitter.

    ``dynamic``: whether a node's duration depends on when it starts or on its own draw (a ``from`` time, operator
    noise) or messages are delayed, which rules out the engine's fast paths that run a node or phase once for many.
    """

    speeds: tuple[ComputeSpeed, ...]
    jitter: Jitter | None
    dynamic: bool

    @classmethod
    def of(cls, options: SystemOptions, npus: int, sample: int = 0) -> Perturbation | None:
        """The perturbation of sample ``sample`` on ``npus`` NPUs; None when the options name none."""
        if not options.perturbed:
            return None
        variability = options.variability
        seed = (variability.seed if variability else 0) + sample
        profiles = slowdown_profiles(options.slowdown, npus)
        factors = [profiles[npu][0] if npu in profiles else 1.0 for npu in range(npus)]
        later = [profiles[npu][1] if npu in profiles else () for npu in range(npus)]
        if variability is not None and variability.npu is not None:
            drawn = variability.npu.draw(generator(seed, 0), npus).tolist()
            factors = [factor * draw for factor, draw in zip(factors, drawn)]
        operator = variability.operator if variability else None
        speeds = tuple(
            ComputeSpeed(
                factors[npu], later[npu], None if operator is None else _Draws(operator, generator(seed, 1, npu))
            )
            for npu in range(npus)
        )
        network = variability.network if variability else None
        jitter = None if network is None else Jitter(network.jitter, generator(seed, 2))
        dynamic = operator is not None or jitter is not None or any(later)
        return cls(speeds, jitter, dynamic)
