"""ns-3 as a packet-level network backend (``network: {backend: ns3}``, extra ``ns3``): see :mod:`.network`."""

from stratasim.adapters.ns3.network import Ns3Network

__all__ = ["Ns3Network"]
