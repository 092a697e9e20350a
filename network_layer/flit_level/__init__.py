"""The flit-level network, in the spirit of Garnet and BookSim: messages cut into packets and flits, input-buffered
routers with virtual channels, credit-based flow control, a router pipeline, deadlock-free routing.

Modules: :mod:`.parameters` (the routers' micro-architecture and its defaults), :mod:`.packets`
(packetisation), :mod:`.router` (buffers, ports, links), :mod:`.deadlock` (virtual-channel classes),
:mod:`.dimensions` (a list of dimensions as links), :mod:`.engine` (the event loop), :mod:`.one_hop` (each port
by itself while every message crosses one link) and :mod:`.network` (the backend).
"""

from stratasim.network_layer.flit_level.network import FlitLevelNetwork
from stratasim.network_layer.flit_level.parameters import FlitParameters
from stratasim.network_layer.packet_latency import PacketLatency

__all__ = ["FlitLevelNetwork", "FlitParameters", "PacketLatency"]
