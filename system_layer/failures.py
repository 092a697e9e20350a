"""The ``system.failures`` key: NPUs that fail at a time (see docs/how-to/link-failures.md).

A failed NPU stops: the node it runs never finishes, it starts and sends nothing more, and messages to it are lost.
Its job cannot go on without it (its collectives cannot complete; a real job crashes and restarts from a checkpoint,
which ``goodput`` prices), so the engine stops every NPU of that job at that time
(:mod:`stratasim.system_layer.engine.npu_failures`); the other jobs of the study run on.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.kernel.npu_ids import NpuIds
from stratasim.kernel.schema import Section, TimePs

__all__ = ["NpuFailure", "failure_problems"]


class NpuFailure(Section):
    """One entry of ``system.failures``: the NPUs ``npus`` fail at ``at``."""

    npus: NpuIds
    """The NPUs that fail: ids and ``"a-b"`` ranges, e.g. ``[5]``."""
    at: TimePs
    """When they fail: the job holding each stops there."""


def failure_problems(entries: Sequence[NpuFailure], npus: int) -> list[str]:
    """The entries naming an NPU the topology does not have."""
    return [
        f"entry {i} names NPU {max(entry.npus)} but the topology has {npus} NPUs (0-{npus - 1})"
        for i, entry in enumerate(entries)
        if max(entry.npus) >= npus
    ]
