"""A network session over the wire: one stream per run, a fresh backend each, sends batched per window."""

from __future__ import annotations

from stratasim.remote import NetworkClient
from stratasim.v1 import network_pb2
from tests.contracts.contract_fakes import FakeNetwork, served

TOPOLOGY = network_pb2.Topology(
    dimensions=[
        network_pb2.Dimension(kind=network_pb2.Dimension.SWITCH, size=8, bandwidth_bytes_per_s=1e10, latency_ps=2000)
    ]
)
SENDS = network_pb2.SendBatch(
    id=[3, 1, 2], src=[0, 1, 2], dst=[7, 6, 5], bytes=[100, 1 << 20, 0], send_time_ps=[0, 5, 5]
)


def test_each_session_gets_a_fresh_backend(network_endpoint: str) -> None:
    first = NetworkClient(network_endpoint, backend="fake", timeout_s=5)
    first.configure(TOPOLOGY)
    first.inject(SENDS)
    first.close()
    second = NetworkClient(network_endpoint, backend="fake", timeout_s=5)
    try:
        second.configure(TOPOLOGY)
        assert not second.advance(-1).has_next
    finally:
        second.close()


def test_injects_are_merged_into_the_next_advance_and_negative_until_is_forwarded() -> None:
    seen: list[tuple[str, object]] = []

    class Recording(FakeNetwork):
        def inject(self, sends: network_pb2.SendBatch) -> None:
            seen.append(("inject", list(sends.id)))
            super().inject(sends)

        def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
            seen.append(("advance", until_ps))
            return super().advance(until_ps)

    with served("network", "rec", {"rec": Recording}) as endpoint:
        network = NetworkClient(endpoint, backend="rec", timeout_s=5)
        try:
            network.configure(TOPOLOGY)
            for i in range(3):
                network.inject(network_pb2.SendBatch(id=[i], src=[0], dst=[1], bytes=[8], send_time_ps=[i]))
            network.advance(-1)
            network.advance(-7)
        finally:
            network.close()
    assert seen == [("inject", [0, 1, 2]), ("advance", -1), ("advance", -7)]


def test_windows_larger_than_grpc_default_limits_pass_both_ways() -> None:
    class Echo(FakeNetwork):
        """Delivers every injected message at once: the answer is as large as the request."""

        def inject(self, sends: network_pb2.SendBatch) -> None:
            self._echo = network_pb2.DeliveryBatch(id=sends.id, time_ps=sends.send_time_ps)

        def advance(self, until_ps: int) -> network_pb2.AdvanceResult:
            return network_pb2.AdvanceResult(deliveries=self._echo, window_end_ps=until_ps)

    count = 400_000  # about 8 MB each way; grpc's default limit is 4 MiB
    big = range(2**40, 2**40 + count)
    with served("network", "echo", {"echo": Echo}) as endpoint:
        network = NetworkClient(endpoint, backend="echo", timeout_s=10)
        try:
            network.inject(
                network_pb2.SendBatch(id=big, src=[0] * count, dst=[1] * count, bytes=[1] * count, send_time_ps=big)
            )
            result = network.advance(2**41)
        finally:
            network.close()
    assert len(result.deliveries.id) == count and result.deliveries.id[-1] == big[-1]
