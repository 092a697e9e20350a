"""A switch that reduces: contributions held at a dimension's switch until a reduction's last one is in.

A batch's :class:`~stratasim.v1.network_pb2.SwitchReduction` entries mark messages as contributions: each carries
its member's ``bytes`` up to the switch of ``dimension`` (a switch marked ``in_network_reduction``); the switch holds
them, per ``reduction``, until all ``members`` contributions arrived, then sends ``result_bytes`` down to every member,
and each contribution is delivered when its own member's result has arrived. Reducing costs the switch nothing here
(NVSwitch and SHARP reduce at line rate).

The switch forwards as it reduces (cut-through, as NVSwitch's multimem and SHARP stream): the result's head leaves
once every contribution's head is in, and its tail no sooner than the last contribution's tail is in. Uncontended, a
member's result therefore arrives at the latest sending time plus two latencies plus the larger of the up and down
serialisations: what a message through the switch pays (see :mod:`stratasim.network_layer.analytical`), only from
the last sender. The analytical and congestion-aware networks both build on this module; the others refuse the batch
(:func:`stratasim.kernel.switch_reduction.refuse_switch_reduction`).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratasim.kernel.errors import BackendError
from stratasim.v1 import network_pb2

__all__ = ["Contribution", "SwitchReductions", "release_ps"]

_SWITCH = network_pb2.Dimension.SWITCH


@dataclass(frozen=True)
class Contribution:
    """One member's message to a reduction at a switch."""

    message: int
    src: int
    sent_ps: int
    bytes: int
    result_bytes: int
    reduction: int
    members: int
    dimension: int


class SwitchReductions:
    """The contributions a network holds at its switches, by reduction, until each reduction is complete."""

    def __init__(self, backend: str, dimensions: tuple[network_pb2.Dimension, ...]) -> None:
        self._backend = backend
        self._dims = dimensions
        self._held: dict[int, list[Contribution]] = {}

    def split(self, sends: network_pb2.SendBatch) -> tuple[network_pb2.SendBatch, list[Contribution]]:
        """The batch's ordinary messages (a batch of their own) and its contributions, checked."""
        marked = {entry.message: entry for entry in sends.reductions}
        rest = network_pb2.SendBatch()
        contributions: list[Contribution] = []
        flows = sends.flow if sends.flow else None
        for i, msg_id in enumerate(sends.id):
            entry = marked.get(msg_id)
            if entry is None:
                rest.id.append(msg_id)
                rest.src.append(sends.src[i])
                rest.dst.append(sends.dst[i])
                rest.bytes.append(sends.bytes[i])
                rest.send_time_ps.append(sends.send_time_ps[i])
                if flows is not None:
                    rest.flow.append(flows[i])
                continue
            contribution = Contribution(
                msg_id,
                sends.src[i],
                sends.send_time_ps[i],
                sends.bytes[i],
                entry.result_bytes,
                entry.reduction,
                entry.members,
                entry.dimension,
            )
            self._check(contribution, sends.dst[i])
            contributions.append(contribution)
        return rest, contributions

    def _check(self, contribution: Contribution, dst: int) -> None:
        dim = contribution.dimension
        if dim >= len(self._dims) or self._dims[dim].kind != _SWITCH or not self._dims[dim].in_network_reduction:
            raise BackendError(
                f"message {contribution.message}: network backend {self._backend!r} reduces only at the switch of a "
                f"dimension marked in_network_reduction: true; dimension {dim} is not one"
            )
        if dst != contribution.src or contribution.members < 1:
            raise BackendError(
                f"message {contribution.message}: a contribution to a switch reduction goes back to its sender "
                f"(dst {dst} != src {contribution.src}) and names at least one member ({contribution.members})"
            )

    def add(self, contribution: Contribution) -> list[Contribution] | None:
        """Hold ``contribution``; return its reduction's contributions, in arrival order, once it completes them."""
        held = self._held.setdefault(contribution.reduction, [])
        held.append(contribution)
        if len(held) < contribution.members:
            return None
        del self._held[contribution.reduction]
        return held

    @property
    def pending(self) -> bool:
        """Whether some reduction still waits for contributions."""
        return bool(self._held)

    def clear(self) -> None:
        self._held.clear()


def release_ps(heads: list[int], tails: list[int], down_ps: int) -> tuple[int, int]:
    """When a result's head leaves the switch and when its tail does, given the contributions' head and tail times
    at the switch and the down-link's serialisation of the result (cut-through: see the module's docstring)."""
    head = max(heads)
    return head, max(head + down_ps, max(tails))
