"""Any layer in its own process: one generic gRPC servicer and one generic client per contract.

:class:`NetworkClient` and :class:`ComputeClient` implement the same Protocols as in-process backends
(:mod:`stratasim.kernel.contracts`), so the engine cannot tell them apart; :func:`serve` runs a registered backend
behind the matching gRPC service and :func:`spawn` runs ``stratasim serve`` as a child process (:func:`start`
without waiting for it to listen). Every failure
of the wire (unreachable peer, handshake mismatch, peer gone, deadline) raises
:class:`~stratasim.kernel.errors.RemoteError` naming the layer and the endpoint; errors a backend raises come back as
the same class with the same message.
"""

from stratasim.remote.compute_client import ComputeClient
from stratasim.remote.network_client import NetworkClient
from stratasim.remote.server import Spawned, serve, spawn, start

__all__ = ["ComputeClient", "NetworkClient", "Spawned", "serve", "spawn", "start"]
