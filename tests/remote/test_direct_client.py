"""A network served by a server that prices messages on the spot is, to the engine, the network in-process: a
:class:`DirectNetwork` answering each kind of message once, with the times the backend gives in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from stratasim.config.study_file import load_study
from stratasim.kernel.contracts import DirectNetwork
from stratasim.kernel.errors import BackendError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.remote import DirectNetworkClient, NetworkClient, open_network
from stratasim.study.run import run_study
from stratasim.v1 import network_pb2
from tests.contracts.contract_fakes import factories, served
from tests.contracts.test_network_contract import topology

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def analytical_endpoint() -> Iterator[str]:
    with served("network", "analytical") as endpoint:
        yield endpoint


def _counting(client: DirectNetworkClient, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The replies ``client`` waits for from now on, in order."""
    inner = client._client
    asked: list[str] = []
    exchange = inner._exchange

    def counted(request: network_pb2.NetworkRequest, expected: str) -> network_pb2.NetworkResponse:
        asked.append(expected)
        return exchange(request, expected)

    monkeypatch.setattr(inner, "_exchange", counted)
    return asked


def test_a_server_that_prices_on_the_spot_gives_a_direct_network(
    analytical_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = AnalyticalNetwork()
    local.configure(topology())
    client = open_network(analytical_endpoint, backend="analytical")
    assert isinstance(client, DirectNetworkClient) and isinstance(client, DirectNetwork)
    asked = _counting(client, monkeypatch)
    src, dst, size = np.array([0, 3, 7, 2]), np.array([5, 1, 0, 6]), np.array([0, 64, 1 << 20, 4096])
    try:
        assert client.configure(topology()).stateless
        many = client.transits_ps(src, dst, size).tolist()
        one = [client.transit_ps(s, d, b) for s, d, b in zip(src.tolist(), dst.tolist(), size.tolist())]
        again = client.transits_ps(src[::-1], dst[::-1], size[::-1]).tolist()
        new = client.transit_ps(1, 2, 8)
    finally:
        client.close()
    expected = [local.transit_ps(s, d, b) for s, d, b in zip(src.tolist(), dst.tolist(), size.tolist())]
    assert many == one == expected and again == expected[::-1] and new == local.transit_ps(1, 2, 8)
    assert asked == ["configured", "transited", "transited"]  # kinds seen before cost no round trip


def test_a_bad_message_fails_as_in_process(analytical_endpoint: str) -> None:
    client = open_network(analytical_endpoint, backend="analytical")
    try:
        client.configure(topology())
        with pytest.raises(BackendError, match="from NPU 0 to NPU 8"):
            client.transit_ps(0, 8, 64)  # type: ignore[union-attr]
    finally:
        client.close()


def test_a_server_that_cannot_price_on_the_spot_keeps_the_windows() -> None:
    with served("network", "fake", factories("network")) as endpoint:
        client = open_network(endpoint, backend="fake")
        try:
            assert type(client) is NetworkClient and not isinstance(client, DirectNetwork)
        finally:
            client.close()


def test_every_npu_spawned_runs_as_in_process() -> None:
    # Every NPU simulated, lock-step phases a line at a time: with the network spawned the engine takes the very
    # same paths, so even the count of events agrees.
    overrides = ["system.aggregate=false", "network.topology.0.size=16", "network.topology.1.size=4"]
    quickstart = ROOT / "examples" / "quickstart.yaml"
    local = run_study(load_study(quickstart, overrides)).to_dict()
    remote = run_study(load_study(quickstart, [*overrides, "network.spawn=true", "compute.spawn=true"])).to_dict()
    for report in (local, remote):
        del report["wall_seconds"], report["backends"]
    assert local == remote
