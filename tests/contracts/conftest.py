"""Fixtures of the contract suites: every registered backend, plus the fakes, in-process and over gRPC."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from stratasim.kernel import registry
from stratasim.remote import ComputeClient, NetworkClient
from tests.contracts.contract_fakes import factories, served

_CLIENTS: dict[str, Callable[..., Any]] = {"network": NetworkClient, "compute": ComputeClient}


@pytest.fixture(scope="module")
def endpoint_of() -> Iterator[Callable[[str, str], str]]:
    """``endpoint_of(layer, name)``: a gRPC server for that backend, started on first use, stopped at module end."""
    with ExitStack() as stack:
        endpoints: dict[tuple[str, str], str] = {}

        def endpoint_of(layer: str, name: str) -> str:
            if (layer, name) not in endpoints:
                endpoints[layer, name] = stack.enter_context(served(layer, name, factories(layer)))
            return endpoints[layer, name]

        yield endpoint_of


@pytest.fixture
def open_backend(endpoint_of: Callable[[str, str], str]) -> Iterator[Callable[[str, str, str], Any]]:
    """``open_backend(layer, name, mode)``: the backend in-process or a client of its server; closed at test end."""
    opened: list[Any] = []

    def open_backend(layer: str, name: str, mode: str) -> Any:
        if (layer, name) == ("network", "ns3"):  # an adapter: only with its extra (CI's adapters stage)
            pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'stratasim[ns3]'")
        if mode == "in-process":
            backend = registry.load(layer, name, extra=factories(layer))()
        else:
            # External simulators behind the compute contract can take minutes on one request; ns-3 takes 1-2 s to
            # start before its network's first answer, 10-15 s when it compiles the network into an empty cache, and
            # more where there is no cache (cppyy compiles it at each start).
            timeout_s = 10.0 if layer == "network" and name != "ns3" else 300.0
            backend = _CLIENTS[layer](endpoint_of(layer, name), backend=name, timeout_s=timeout_s)
        opened.append(backend)
        return backend

    yield open_backend
    for backend in opened:
        backend.close()
