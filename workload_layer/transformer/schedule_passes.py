"""What a pipeline schedule orders: passes of a stage's model chunks over micro-batches, forward or backward, the
backward pass whole or split into its input-gradient and weight-gradient halves (zero-bubble schedules)."""

from __future__ import annotations

from typing import Literal, NamedTuple, TypeAlias

__all__ = ["Direction", "Pass", "OverlappedPass", "GRADIENT_PASSES", "WEIGHT_PASSES"]

Direction: TypeAlias = Literal["forward", "backward", "input", "weight"]
"""A pass's kind: ``forward``; ``backward``, the whole backward pass; or its two halves as zero-bubble schedules
run them apart (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): ``input`` (their B, the input
gradients, which the previous stage waits for) and ``weight`` (their W, the weight gradients, which nothing
downstream waits for)."""

GRADIENT_PASSES: frozenset[str] = frozenset({"backward", "input"})
"""The passes that receive an output gradient and send an input gradient on."""

WEIGHT_PASSES: frozenset[str] = frozenset({"backward", "weight"})
"""The passes that finish a chunk's weight gradients."""


class Pass(NamedTuple):
    """One pass of one of a stage's model chunks over one micro-batch."""

    direction: Direction
    chunk: int
    micro_batch: int


class OverlappedPass(Pass):
    """A pass that runs alongside the pass before it (DualPipe's overlapped forward and backward chunks): both wait
    only for what came before that pass, so the engine interleaves their operators and one's communication hides
    under the other's compute. Equal to the plain :class:`Pass` of the same fields."""

    __slots__ = ()
