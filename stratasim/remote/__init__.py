"""Any layer in its own process: one generic gRPC servicer and one generic client per contract.

:class:`NetworkClient` and :class:`ComputeClient` implement the same Protocols as in-process backends
(:mod:`stratasim.kernel.contracts`), so the engine cannot tell them apart — :func:`open_network` hands back a
:class:`DirectNetworkClient` when the server prices messages on the spot, which the engine then uses as it would
the network in-process; :func:`serve` runs a registered backend behind the matching gRPC service and :func:`spawn`
runs ``stratasim serve`` as a child process (:func:`start` without waiting for it to listen). Every failure
of the wire (unreachable peer, handshake mismatch, peer gone, deadline) raises
:class:`~stratasim.kernel.errors.RemoteError` naming the layer and the endpoint; errors a backend raises come back as
the same class with the same message.

The names are imported when first used: starting servers (:mod:`stratasim.remote.launch`) does not import gRPC, so a
run starts them before it pays for that import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from stratasim.remote.compute_client import ComputeClient
    from stratasim.remote.launch import Spawned, new_token, spawn, start
    from stratasim.remote.network_client import DirectNetworkClient, NetworkClient, open_network
    from stratasim.remote.server import serve
    from stratasim.remote.serving_client import ServingPricerClient

__all__ = [
    "ComputeClient",
    "DirectNetworkClient",
    "NetworkClient",
    "Spawned",
    "new_token",
    "open_network",
    "serve",
    "ServingPricerClient",
    "spawn",
    "start",
]

_HOMES = {
    "ComputeClient": "compute_client",
    "DirectNetworkClient": "network_client",
    "NetworkClient": "network_client",
    "open_network": "network_client",
    "serve": "server",
    "ServingPricerClient": "serving_client",
    "Spawned": "launch",
    "new_token": "launch",
    "spawn": "launch",
    "start": "launch",
}


__getattr__ = lazy_exports(__name__, _HOMES)
