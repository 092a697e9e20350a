"""Link busy stretches (``Topology.record_link_busy``) cross the wire unchanged: every backend gives the same in
process and through a gRPC server, and what it records adds up to its links' busy times."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stratasim.kernel.contracts import NetworkBackend
from stratasim.v1 import network_pb2
from tests.contracts.test_network_contract import MODES, NAMES, drain, sends, topology


def recorded(network: NetworkBackend, record: bool) -> network_pb2.LinkCounters:
    """The counters after a mixed load on the contract's topology, recording busy stretches or not."""
    asked = topology()
    asked.record_link_busy = record
    network.configure(asked)
    network.inject(sends(30, 0, 0))
    network.inject(sends(10, 1_000, 2_000_000))
    drain(network)
    return network.counters()


@pytest.mark.parametrize("name", NAMES)
def test_in_process_and_remote_record_the_same_stretches(name: str, open_backend: Callable[..., Any]) -> None:
    local, remote = (recorded(open_backend("network", name, mode), True) for mode in MODES)
    assert remote == local
    busy = dict(zip(local.link, local.busy_ps))
    if local.busy:  # a backend that records at all records every link that was busy
        assert {link.link for link in local.busy} == {link for link, ps in busy.items() if ps > 0}
    for link in local.busy:
        stretches = list(zip(link.start_ps, link.end_ps))
        assert len(link.start_ps) == len(link.end_ps) and stretches
        assert all(start < end for start, end in stretches)
        assert all(before[1] < after[0] for before, after in zip(stretches, stretches[1:]))
        assert sum(end - start for start, end in stretches) == busy[link.link]


@pytest.mark.parametrize("name", NAMES)
def test_nothing_is_recorded_unless_asked(name: str, open_backend: Callable[..., Any]) -> None:
    for mode in MODES:
        assert not recorded(open_backend("network", name, mode), False).busy
