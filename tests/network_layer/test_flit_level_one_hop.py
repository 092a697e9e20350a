"""The flit-level network moved port by port while every message crosses one link (:mod:`.one_hop`) gives what its
event loop gives: the same deliveries, link counters and packet latencies, and the same next arbitrations queued in
the same order (which decides ties at equal times once messages crossing several links come back)."""

from __future__ import annotations

import random

import pytest

from stratasim.network_layer.flit_level import FlitLevelNetwork, FlitParameters
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import link, torus

EVENT_LOOP_ONLY = 10**9  # counted as tangled messages: the engine never moves ports apart


def pending(network: FlitLevelNetwork) -> list[tuple[int, int, int, int]]:
    """The network's next arbitrations in the order they are processed: (time, port's ends, slot)."""
    events = network._engine.events
    return [
        (time_ps, port.src, port.dst, port.scheduled_slot) for time_ps, seq, port in sorted(events) if port.token == seq
    ]


def neighbour(rng: random.Random, src: int, side: int, far: bool) -> int:
    """A random NPU one link away from ``src`` on a ``side`` x ``side`` torus (anywhere else when ``far``)."""
    if far:
        return (src + rng.randrange(1, side * side)) % (side * side)
    x, y = src % side, src // side
    dx, dy = rng.choice([(1, 0), (-1, 0), (0, 1), (0, -1)])
    return (x + dx) % side + side * ((y + dy) % side)


def sends(rng: random.Random, first_id: int, now: int, side: int, far: bool) -> pb.SendBatch:
    batch = pb.SendBatch()
    for msg_id in range(first_id, first_id + rng.randint(1, 24)):
        src = rng.randrange(side * side)
        batch.id.append(msg_id)
        batch.src.append(src)
        batch.dst.append(neighbour(rng, src, side, far))
        batch.bytes.append(rng.choice([0, 64, 4096, 20000, 60000]))
        batch.send_time_ps.append(now + rng.choice([0, 0, 1, 1280, rng.randrange(3000)]))
        batch.flow.append(rng.choice([0, 0, 1]))
    return batch


@pytest.mark.parametrize("seed", range(6))
def test_one_link_runs_match_the_event_loop(seed: int) -> None:
    rng = random.Random(seed)
    side = 4
    topology = torus(side, side, links=(link(rng.choice([50e9, 30e9]), rng.choice([20_000, 500_000])),))
    topology.record_link_busy = True
    parameters = FlitParameters(
        vcs=rng.choice([2, 4]), buffer_flits=rng.choice([0, 3]), packet_flits=rng.choice([1, 5])
    )
    apart, loop = FlitLevelNetwork(parameters), FlitLevelNetwork(parameters)
    for network in (apart, loop):
        network.configure(topology)
    loop._engine.tangled = EVENT_LOOP_ONLY
    now, first_id = 1000, 0
    for phase in range(5):
        batch = sends(rng, first_id, now, side, far=phase == 3)
        first_id += len(batch.id)
        for network in (apart, loop):
            network.inject(batch)
        for _ in range(rng.randint(1, 6)):
            now += rng.choice([1, 700, 1280, 5000, 50_000, 400_000])
            assert apart.advance(now) == loop.advance(now)
            assert pending(apart) == pending(loop)
        now += 4000
    while (result := loop.advance(-1)).has_next or result.deliveries.id:
        assert apart.advance(-1) == result
    assert apart._engine.tangled == 0
    assert apart.counters() == loop.counters()
