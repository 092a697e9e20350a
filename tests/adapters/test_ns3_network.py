"""The ns3 network backend (``adapters/ns3``): zero-load agreement with the analytical network, end-to-end runs
in-process and served, and clear refusals of what ns-3 cannot take.

Zero-load argument (``adapters/ns3/network.py``, ``docs/validation/ns3-backend.md``): a lone message of ``S`` bytes over a
leg of ``h`` links of bandwidth ``B`` and latency ``L`` is ``n = ceil(S / MTU)`` packets (one when empty), the
first of ``p = min(S, MTU)`` payload bytes, each with ``H' = 62`` header bytes; ns-3 takes ``h L + (S + n H') / B
+ (h - 1) (p + H') / B`` to within ``n + h`` ps of per-packet rounding, and the analytical network ``h L + S / B``.

The tests that start ns-3 (1-2 s each once the network is compiled into the user's cache, ``adapters/ns3/_build.py``)
are marked ``adapters`` and run in CI's adapters stage; without the ``ns3`` extra they skip.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

import stratasim
from stratasim.adapters.ns3 import Ns3Network
from stratasim.adapters.ns3 import network as ns3_network
from stratasim.adapters.ns3.network import MAX_PACKETS, MTU, WIRE_HEADER
from stratasim.cli import main
from stratasim.kernel.errors import BackendError, TopologyError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.v1 import network_pb2

RING, SWITCH, FULLY = network_pb2.Dimension.RING, network_pb2.Dimension.SWITCH, network_pb2.Dimension.FULLY_CONNECTED
SIZES = (0, 1, MTU, 10_000, 1 << 20)


def _dim(kind: int, size: int, gbps: float, latency_ns: int) -> network_pb2.Dimension:
    return network_pb2.Dimension(kind=kind, size=size, bandwidth_bytes_per_s=gbps * 1e9, latency_ps=latency_ns * 1000)


def _needs_ns3() -> None:
    pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")


def _formula_ps(size: int, legs: list[tuple[int, float, int]]) -> tuple[Fraction, int]:
    """ns-3's zero-load time by the argument above, exact, and its rounding allowance; ``legs`` holds each leg's
    (links, bandwidth in B/s, latency in ps)."""
    packets = max(1, -(-size // MTU))
    largest = min(size, MTU)
    total, slack = Fraction(0), 0
    for links, bandwidth, latency in legs:
        per_byte = Fraction(10**12) / Fraction(bandwidth)
        headers_and_body = (size + packets * WIRE_HEADER) * per_byte
        total += links * latency + headers_and_body + (links - 1) * (largest + WIRE_HEADER) * per_byte
        slack += packets + links
    return total, slack


def _tolerance_ps(size: int, legs: list[tuple[int, float, int]]) -> int:
    """How far above the analytical network ns-3 may be: headers, one packet time per further link, rounding."""
    packets = max(1, -(-size // MTU))
    return sum(
        int(Fraction(10**12) / Fraction(bandwidth) * (packets * WIRE_HEADER + (links - 1) * (MTU + WIRE_HEADER)))
        + packets
        + links
        + 1
        for links, bandwidth, _ in legs
    )


def _one_at_a_time(network: Ns3Network, messages: list[tuple[int, int, int]]) -> list[int]:
    """Send each (src, dst, size) once the one before has arrived; each one's transit time."""
    transits, now = [], 1000
    for msg_id, (src, dst, size) in enumerate(messages):
        network.inject(network_pb2.SendBatch(id=[msg_id], src=[src], dst=[dst], bytes=[size], send_time_ps=[now]))
        result = network.advance(-1)
        while not result.deliveries.id:
            assert result.has_next, f"message {msg_id} was lost"
            result = network.advance(-1)
        assert list(result.deliveries.id) == [msg_id]
        transits.append(result.deliveries.time_ps[0] - now)
        now = result.deliveries.time_ps[0] + 7
    return transits


CASES = {
    # name: (dimensions, [(src, dst, [(links, bandwidth, latency) per leg])])
    "ring": (
        [_dim(RING, 8, 50, 500)],
        [(0, dst, [(hops, 50e9, 500_000)]) for dst, hops in ((1, 1), (2, 2), (5, 3), (4, 4))],
    ),
    "switch": ([_dim(SWITCH, 8, 25, 1000)], [(0, 5, [(2, 25e9, 1_000_000)]), (7, 3, [(2, 25e9, 1_000_000)])]),
    "ring x switch": (
        [_dim(RING, 4, 50, 500), _dim(SWITCH, 4, 25, 1000)],
        [(0, 6, [(2, 50e9, 500_000), (2, 25e9, 1_000_000)]), (1, 13, [(2, 25e9, 1_000_000)])],
    ),
}


@pytest.mark.adapters
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lone_message_takes_the_analytical_time_plus_headers_and_store_and_forward(case: str) -> None:
    _needs_ns3()
    dimensions, routes = CASES[case]
    topology = network_pb2.Topology(dimensions=dimensions)
    network, analytical = Ns3Network(), AnalyticalNetwork()
    analytical.configure(topology)
    assert network.configure(topology).lookahead_ps > 0
    messages = [(src, dst, size) for src, dst, _ in routes for size in SIZES]
    try:
        transits = _one_at_a_time(network, messages)
    finally:
        network.close()
    legs = [legs for _, _, legs in routes for _ in SIZES]
    for (src, dst, size), got, leg in zip(messages, transits, legs):
        formula, slack = _formula_ps(size, leg)
        assert abs(got - formula) <= slack, (src, dst, size, got, float(formula))
        excess = got - analytical.transit_ps(src, dst, size)
        assert 0 < excess <= _tolerance_ps(size, leg), (src, dst, size, excess)
        if size >= 1 << 20:  # large messages: within the headers' 1.5 % and a few packet times
            assert excess / analytical.transit_ps(src, dst, size) < 0.02 * len(leg) + 0.01


def _study(backend: str, **network: object) -> dict[str, object]:
    return {
        "name": "ns3",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "4MiB"},
        "system": {"algorithm": "ring", "splits": 2, "active_chunks": 1, "endpoint_delay": "10ns"},
        "network": {
            "backend": backend,
            "topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}],
            **network,
        },
    }


@pytest.mark.adapters
def test_a_study_runs_on_ns3_in_process_and_served_alike() -> None:
    """A ring all-reduce sends each chunk to the next NPU over links no other message uses at the time: ns-3's
    total is the analytical one plus headers and no queueing; served (``spawn: true``) it is the same to the ps;
    its links carried what the congestion-aware network's carry, the same messages routed the same way."""
    _needs_ns3()
    analytical = stratasim.run(_study("analytical")).total_time_ps
    links = stratasim.run(_study("congestion_aware")).to_dict()["links"]
    local = stratasim.run(_study("ns3"))
    served = stratasim.run(_study("ns3", spawn=True))
    assert local.total_time_ps == served.total_time_ps
    assert analytical < local.total_time_ps < analytical * (1 + WIRE_HEADER / MTU + 0.005)
    carried = [(row["link"], row["bytes"], row["messages"]) for row in local.to_dict()["links"]]
    assert carried == [(row["link"], row["bytes"], row["messages"]) for row in links] and len(carried) == 4
    busy = {row["link"]: row["busy_ns"] for row in local.to_dict()["links"]}
    assert all(busy[row["link"]] > row["busy_ns"] for row in links)  # headers, 62 B a packet


def test_a_fabric_is_refused_before_ns3_starts() -> None:
    topology = network_pb2.Topology(dimensions=[network_pb2.Dimension(size=16)])
    topology.torus.shape.extend([4, 4])
    with pytest.raises(TopologyError, match=r"topology.torus: the ns3 backend builds Ring, FullyConnected and Switch"):
        Ns3Network().configure(topology)


def test_a_topology_too_large_for_ns3_is_refused_naming_its_size() -> None:
    topology = network_pb2.Topology(dimensions=[_dim(FULLY, 512, 50, 500)])
    with pytest.raises(TopologyError, match=r"512 NPUs and switches and 130,816 links exceed what the ns3 backend"):
        Ns3Network().configure(topology)


def test_without_the_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ns3_network.importlib.util, "find_spec", lambda name, *_: None)
    with pytest.raises(BackendError, match=r"pip install 'stratasim\[ns3\]'"):
        Ns3Network().configure(network_pb2.Topology(dimensions=[_dim(RING, 4, 50, 500)]))


def test_a_message_too_large_for_ns3_is_refused_before_it_runs() -> None:
    _needs_ns3()
    network = Ns3Network()
    network.configure(network_pb2.Topology(dimensions=[_dim(RING, 4, 50, 500)]))
    size = MAX_PACKETS * MTU + 1
    with pytest.raises(BackendError, match=r"message 3: 4,294,967,297 bytes would be 1,048,577 ns-3 packets"):
        network.inject(network_pb2.SendBatch(id=[3], src=[0], dst=[1], bytes=[size], send_time_ps=[0]))
    network.close()


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        (
            "network.topology={kind: torus, shape: [2, 2], bandwidth: 50GB/s, latency: 500ns}",
            "topology.torus: the ns3 backend builds Ring, FullyConnected and Switch dimensions only",
        ),
        ("workload.size=64GiB", "ns-3 packets of 4096 B, over the ns3 backend's 1,048,576 a message (4 GiB)"),
    ],
)
def test_bad_input_is_one_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, fragment: str
) -> None:
    _needs_ns3()
    path = tmp_path / "study.yaml"
    study = _study("ns3")
    study["system"] = {**study["system"], "splits": 1}  # type: ignore[dict-item]
    path.write_text(yaml.safe_dump(study))
    assert main(["run", str(path), "--set", override]) != 0
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err


def test_ns3_stopping_midway_is_one_clear_error() -> None:
    """ns-3 aborts its process on its own fatal errors: the network says so, and cleans up, rather than hang."""
    _needs_ns3()
    network = Ns3Network()
    network.configure(network_pb2.Topology(dimensions=[_dim(RING, 4, 50, 500)]))
    worker = network._worker
    assert worker is not None
    worker.kill()
    worker.wait()
    network.inject(network_pb2.SendBatch(id=[0], src=[0], dst=[1], bytes=[100], send_time_ps=[0]))
    with pytest.raises(BackendError, match=r"^ns3 network: ns-3 stopped"):
        network.advance(-1)
    assert network._worker is None and network._directory is None


def _jobs_study(places: dict[str, str]) -> dict[str, object]:
    """Jobs of a 4 MiB ring all-reduce each on a ring of 8 NPUs under ns-3, each placed on the NPUs ``places`` names."""
    jobs = [
        {
            "name": name,
            "npus": 4,
            "place": place,
            "workload": {"kind": "collective", "collective": "all_reduce", "size": "4MiB"},
        }
        for name, place in places.items()
    ]
    return {
        "name": "ns3_jobs",
        "workload": {"kind": "jobs", "placement": "explicit", "jobs": jobs},
        "system": {"algorithm": "ring", "splits": 1},
        "network": {
            "backend": "ns3",
            "topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "500ns"}],
        },
    }


def _durations(places: dict[str, str]) -> dict[str, float]:
    return {job["name"]: job["duration_ns"] for job in stratasim.run(_jobs_study(places)).to_dict()["jobs"]}


@pytest.mark.adapters
def test_two_jobs_interfere_on_ns3_where_they_share_links_and_not_where_they_do_not() -> None:
    """Interleaved (a on the even NPUs, b on the odd ones) every hop of each job's ring crosses a link the other's
    crosses too, so ns-3's packets queue behind each other and each all-reduce takes about twice its time alone (as
    on the congestion-aware network: 254.7 us against 131.8 us); packed on the two halves of the ring the jobs share
    no link and each takes exactly its time alone."""
    _needs_ns3()
    alone = _durations({"a": "0,2,4,6"})["a"]
    together = _durations({"a": "0,2,4,6", "b": "1,3,5,7"})
    assert together["a"] > 1.8 * alone and together["b"] > 1.8 * alone
    apart = _durations({"a": "0-3", "b": "4-7"})
    assert apart == {"a": _durations({"a": "0-3"})["a"], "b": apart["a"]}


class _StubWorker:
    """Stands for ns-3's worker process: each message arrives 10 us after it is sent, whatever else is on its way."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, int]] = []

    def ask(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        _, ids, _, _, _, times, horizon = request
        self.pending += [(sent + 10_000_000, msg_id) for msg_id, sent in zip(ids, times)]
        decided = sorted(p for p in self.pending if p[0] - 10_000_000 <= horizon)
        self.pending = [p for p in self.pending if p not in decided]
        return (
            "ok",
            [x for time_ps, msg_id in decided for x in (time_ps, msg_id)],
            min(self.pending, default=(-1,))[0],
            [],  # stuck: never, with no link changes
        )


def test_a_cancelled_flow_is_not_delivered_though_ns3_still_carries_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """ns-3's queues are not edited: cancel only keeps the flow's messages from being delivered (the docstring of
    ``adapters/ns3/network.py`` says so), whether ns-3 has them already or not yet."""
    worker = _StubWorker()
    monkeypatch.setattr(ns3_network.importlib.util, "find_spec", lambda name, *_: object())
    monkeypatch.setattr(Ns3Network, "_start", lambda self, request: None)
    monkeypatch.setattr(Ns3Network, "_ask", lambda self, request: worker.ask(request))
    network = Ns3Network()
    network.configure(network_pb2.Topology(dimensions=[_dim(RING, 4, 50, 500)]))
    network.inject(
        network_pb2.SendBatch(id=[1, 2], src=[0, 1], dst=[1, 2], bytes=[64, 64], send_time_ps=[0, 0], flow=[1, 2])
    )
    first = network.advance(1_000_000)
    network.inject(network_pb2.SendBatch(id=[3], src=[2], dst=[3], bytes=[64], send_time_ps=[1_000_001], flow=[1]))
    assert list(network.cancel(1, 2_000_000).id) == [1, 3]
    delivered = [first, network.advance(-1), network.advance(-1)]
    assert [(t, m) for r in delivered for t, m in zip(r.deliveries.time_ps, r.deliveries.id)] == [(10_000_000, 2)]
