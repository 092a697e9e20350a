"""The unit of every collective algorithm: one step of one NPU (see :mod:`stratasim.system_layer.collectives.algorithms`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Step", "lockstep", "share_bytes"]


@dataclass(frozen=True)
class Step:
    """Send ``bytes`` tagged ``tag`` to each peer at ``offsets``; done once ``need`` messages tagged ``wait`` arrived
    (and ``delay_ps`` more, with the reduction's time)."""

    offsets: tuple[int, ...]
    bytes: int
    need: int
    tag: int = 0
    wait: int = 0
    reduces: bool = False
    reduce_bytes: int = 0
    delay_ps: int = 0
    """Time the NPU spends on the step once its messages are in, before the next (a protocol's per-step overhead)."""
    at_switch: bool = False
    """Send ``bytes`` up to the switch of the phase's line as this NPU's contribution to a reduction there, instead of
    to peers (``offsets`` is empty); the switch sends back ``result_bytes`` once every member's contribution is in,
    as a message tagged ``tag``: the step's one message (``need`` 1), or, with ``need`` 0, a later step's (a
    pipeline's contribution goes up while earlier pieces are still in the network)."""
    result_bytes: int = 0
    switch_dim: int = -1
    """The dimension whose switch reduces an ``at_switch`` step: -1 for the phase's own (a flat phase names it)."""
    group: tuple[int, int] = (1, 0)
    """The members of an ``at_switch`` step's reduction among the phase's positions, as (stride, count): the
    ``count`` positions ``stride`` apart, in the block of ``stride x count`` that holds this NPU's, with it; count 0:
    the whole line."""

    @property
    def reduced_bytes(self) -> int:
        """Bytes reduced once the step's messages are in: ``reduce_bytes`` if set, else all they carry."""
        return self.reduce_bytes or self.bytes * self.need


def lockstep(steps: list[Step]) -> tuple[Step, ...]:
    """Number the steps so that each sends and waits on its own index (every NPU is on the same step)."""
    return tuple(replace(s, tag=i, wait=i) for i, s in enumerate(steps))


def share_bytes(data_bytes: int, n: int) -> int:
    """Bytes of one of ``n`` NPUs' shares of a buffer: rounded up, at least one byte."""
    return max(1, -(-data_bytes // n))
