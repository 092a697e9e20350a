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
    and that result is the step's one message (``need`` 1). A plan's steps are all such steps or none."""
    result_bytes: int = 0

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
