"""Named generators: entries of a sweep's ``space`` that set several study keys at once, where listing values by
hand is impractical.

    space:
      plan: {generator: parallelism, tp: [1, 2, 4, 8]}    # every valid plan (:mod:`stratasim.explore.plans`)
      shape: {generator: topology, chips: 8}              # topology shapes (:mod:`stratasim.explore.shapes`)
      system.algorithm: [ring, direct]

A generator entry is a mapping with a ``generator`` key; its name (``plan``) is a label, not a study key. It
expands, against the base study, to a list of points, each a ``{dotted study key: value}`` mapping: one axis of
the grid whose trials carry the point's keys as their parameters. Combinations it rules out are counted by reason,
not run and not errors. Subclasses define their options as fields, :meth:`Generator.size` and
:meth:`Generator.generate`: a generator is sized (what it would try, counted or bounded from above without listing
it) and the size checked against the sweep's budget before it expands.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stratasim.kernel.schema import Section

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["Generated", "Generator", "GeneratorError", "Size", "divisors", "reason"]

DIVISOR_STEPS = 10**6
"""The most trial divisions :func:`divisors` makes (about a second): beyond, the values are to be listed."""


@dataclass(frozen=True)
class Generated:
    """What a generator produced: its ``points`` (each ``{dotted study key: value}``), the combinations it
    ``skipped`` by reason, and ``notes`` on what it could not check."""

    points: list[dict[str, Any]]
    skipped: Counter[str] = field(default_factory=Counter)
    notes: tuple[str, ...] = ()
    noun: str = "points"

    def describe(self) -> str:
        """``88 plans; skipped 412: 300 model.heads must be divisible by parallelism.tp, 112 do not fit ...``."""
        line = f"{len(self.points)} {self.noun}"
        if self.skipped:
            reasons = ", ".join(f"{count} {why}" for why, count in self.skipped.most_common())
            line += f"; skipped {sum(self.skipped.values())}: {reasons}"
        return "; ".join([line, *self.notes])

    def summary(self, name: str) -> str:
        """The line the sweep prints for its space's entry ``name``."""
        return f"space.{name}: {self.describe()}"


@dataclass(frozen=True)
class Size:
    """What expanding a generator would take, known before it expands: the ``candidates`` it would try (at most),
    the ``bytes`` its points would hold beyond a candidate's own few (a graph's links, say), and the most ``npus``
    a point gives a trial (0: it leaves the base study's)."""

    candidates: int
    bytes: int = 0
    npus: int = 0


class Generator(Section):
    """A generator entry of a sweep's space: ``generator`` names it, the other keys are its options."""

    generator: str

    def size(self, study: Study) -> Size:
        """What :meth:`generate` would try for the base ``study``, counted (or bounded from above) without
        listing it; :class:`GeneratorError` names the option whose values are too many to count."""
        raise NotImplementedError

    def generate(self, study: Study) -> Generated:
        """The points this entry expands to for the base ``study``; :class:`GeneratorError` names the option that
        cannot apply to it."""
        raise NotImplementedError


class GeneratorError(ValueError):
    """An option of a generator that cannot apply to the base study: the option's key and why."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def divisors(n: int, cap: int | None = None, option: str = "", hint: str = "") -> list[int]:
    """Every divisor of ``n`` (at least 1), ascending, at most ``cap``; :class:`GeneratorError` at ``option``,
    saying ``hint``, when finding them would take more than :data:`DIVISOR_STEPS` trial divisions (a 10^15 batch)."""
    n = max(n, 1)
    steps = min(math.isqrt(n), cap if cap is not None else n)
    if steps > DIVISOR_STEPS:
        raise GeneratorError(
            option, f"searching the divisors of {n:,} would take over {DIVISOR_STEPS:,} steps: {hint or 'too large'}"
        )
    found: set[int] = set()
    for d in range(1, steps + 1):
        if n % d == 0:
            found.update(x for x in (d, n // d) if cap is None or x <= cap)
    return sorted(found)


def reason(message: str) -> str:
    """A validation message as a countable reason: without the figures in parentheses, so that "model.heads (96)
    must be divisible by parallelism.tp (64)" and the same rule for tp 32 count together."""
    while True:  # innermost parentheses first: "(global_batch / (micro_batch * dp) = 3)"
        shorter = re.sub(r"\s*\([^()]*\)", "", message)
        if shorter == message:
            return message.strip()
        message = shorter
