"""How much work one compute request may take, as a backend whose cost grows with the operators' sizes counts it
beforehand (:class:`~stratasim.kernel.contracts.SizedWork`), and the refusal of one beyond it, naming its costliest
operator: the same for a server (its ``--max-work``) and for in-process pricing."""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.v1 import compute_pb2

__all__ = ["MAX_WORK", "excess_work"]

MAX_WORK = 1 << 23
"""Steps one compute request may take by default: timeloop's mapper factors each dimension by trial division, some 5
to 15 million steps a second, so this bounds a request to a second or two (a dimension up to some 2^44) while the
largest of a real model (10^10 elements, 2 x 10^5 steps) passes many times over."""


def excess_work(
    steps: Sequence[int], ops: Sequence[compute_pb2.OperatorDesc], limit: int, said: str, advice: str
) -> str | None:
    """Why a request whose operators take ``steps`` is refused, beyond ``limit`` (``said`` in words, the number
    included), naming its costliest operator and ending with ``advice``; None when it is within the limit."""
    total = sum(steps)
    if total <= limit:
        return None
    index = max(range(len(steps)), key=steps.__getitem__)
    name = f" ({ops[index].name!r})" if ops[index].name else ""
    return (
        f"ops[{index}]{name}: pricing it would take some {steps[index]:,} steps (the request {total:,}), beyond "
        f"{said}; refused before any work: {advice}"
    )
