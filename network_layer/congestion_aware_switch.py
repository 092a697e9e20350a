"""The congestion-aware network's reducing switches: contributions queue on their up-links, results on down-links.

A contribution (see :mod:`stratasim.network_layer.switch_reduction`) crosses its member's up-link to the switch of
its dimension like any message, waiting for the link when it is busy; the switch then holds it. Once a reduction's
last contribution is in, each member's result goes down that member's down-link (its head once every contribution's
head is in, its tail no sooner than the last contribution's tail: the link is held for the result's serialisation,
ending then at the earliest), again queueing behind whatever else uses the link. So contributions contend on up-links, results on down-links, and a slow member delays
every member's result; uncontended, a result arrives when the analytical network says.
"""

from __future__ import annotations

from collections.abc import Callable

from stratasim.kernel.grid import Grid
from stratasim.network_layer.congestion_aware_routes import Hop
from stratasim.network_layer.switch_reduction import Contribution, SwitchReductions
from stratasim.v1 import network_pb2

__all__ = ["ReducingSwitches", "Climb", "Result", "Router"]

Router = Callable[[tuple[int, int, int]], tuple[Hop, ...]]
"""The network's route of a (source, destination, size)."""

Climb = tuple[int, tuple[Hop, ...], int, int, int]
"""A contribution's crossing of its up-link: (message id, (up-link hop,), 0, earliest delivery, send time)."""

Result = tuple[int, Climb]
"""A result's crossing of a member's down-link and the time its head is there."""


class ReducingSwitches:
    """The switch reductions of a congestion-aware network on dimensions."""

    def __init__(self, backend: str, topology: network_pb2.Topology, grid: Grid) -> None:
        fabric = topology.WhichOneof("fabric") is not None
        self._reductions = SwitchReductions(backend, () if fabric else tuple(topology.dimensions))
        self._grid = grid
        self.climbing: dict[int, Contribution] = {}
        """Contributions on their way up, by message id."""
        self._in: dict[int, tuple[int, int]] = {}  # message id -> (head, tail) at the switch
        self._earliest: dict[int, int] = {}  # message id -> its earliest delivery

    def climbs(
        self, sends: network_pb2.SendBatch, lookahead: int, route: Router
    ) -> tuple[network_pb2.SendBatch, list[Climb]]:
        """The batch's ordinary messages, and its contributions' up-link crossings."""
        rest, contributions = self._reductions.split(sends)
        climbs: list[Climb] = []
        for c in contributions:
            up = route((c.src, self._neighbour(c.src, c.dimension), c.bytes))[0]
            earliest = self._earliest[c.message] = c.sent_ps + lookahead
            self.climbing[c.message] = c
            climbs.append((c.message, (up,), 0, earliest, c.sent_ps))
        return rest, climbs

    def _neighbour(self, npu: int, dim: int) -> int:
        """Another NPU on ``npu``'s line along ``dim`` (a route to it goes up to the switch, then down)."""
        coordinate = self._grid.coordinate(npu, dim)
        return npu + self._grid.stride(dim) * (1 if coordinate == 0 else -1)

    def arrived(self, msg_id: int, head: int, tail: int, route: Router) -> list[Result]:
        """A contribution's head reaches the switch at ``head``, its tail at ``tail``: the results' crossings of
        the members' down-links once it completes its reduction, else none."""
        contribution = self.climbing.pop(msg_id)
        self._in[msg_id] = (head, tail)
        complete = self._reductions.add(contribution)
        if complete is None:
            return []
        times = [self._in.pop(c.message) for c in complete]
        head_in, tail_in = max(h for h, _ in times), max(t for _, t in times)
        results: list[Result] = []
        for c in complete:
            down = route((self._neighbour(c.src, c.dimension), c.src, c.result_bytes))[-1]
            # A route's last hop holds its link for the serialisation and lands a latency after: the result goes
            # down once every head is in, and holds the link until the last tail is in at the earliest.
            start = max(head_in, tail_in - down[1])
            results.append((start, (c.message, (down,), 0, self._earliest.pop(c.message), start)))
        return results

    def clear(self) -> None:
        self._reductions.clear()
        self.climbing.clear()
        self._in.clear()
        self._earliest.clear()
