"""The network sessions serving's pricers simulate on: each priced collective, pipeline transfer and KV move is a
simulation of its own, and the network contract runs one simulation per session.

A network whose delays do not depend on traffic (``NetworkInfo.stateless``, as the analytical one) answers the
same whatever it simulated before, so its one session is reused; any other (the congestion-aware and flit-level
backends keep their links' state and their committed time) gets a fresh session per simulation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack

from stratasim.kernel.contracts import NetworkBackend
from stratasim.system_layer.engine.simulation import simulate
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.result import SimulationResult
from stratasim.v1 import network_pb2, workload_pb2

__all__ = ["NetworkSessions"]


class NetworkSessions:
    """Simulates execution graphs on ``topology`` under ``options``: on ``backend`` while it is stateless or no
    ``fresh`` factory is given (the caller vouches it may be reused), else on a backend ``fresh`` opens (closed with
    the stack it is given) for each simulation."""

    def __init__(
        self,
        backend: NetworkBackend,
        topology: network_pb2.Topology,
        options: SystemOptions,
        fresh: Callable[[ExitStack], NetworkBackend] | None = None,
    ) -> None:
        self._backend, self._topology, self._options = backend, topology, options
        self._fresh = None if fresh is None or backend.configure(topology).stateless else fresh

    def simulate(self, graphs: Sequence[workload_pb2.ExecutionGraph]) -> SimulationResult:
        """Run ``graphs`` (one per NPU from 0) alone on the network."""
        if self._fresh is None:
            return simulate(graphs, self._backend, self._topology, self._options)
        with ExitStack() as stack:
            return simulate(graphs, self._fresh(stack), self._topology, self._options)
