"""Serving's pricing: a request-level serving loop's iterations, expert parts and KV moves (the vocabulary and
contracts of :mod:`stratasim.kernel.serving`) priced by the compute backend, through the operator pricer, and by the
system and network layers.

Every pricer here takes numbers and ranges (devices, NPU ids, plans), never a study: the composition root opens
the backends and hands them over.
"""

from stratasim.system_layer.serving.kv_transfer import NetworkKvTransfer, quantised
from stratasim.system_layer.serving.pricer import BackendPricer
from stratasim.system_layer.serving.sessions import NetworkSessions

__all__ = ["BackendPricer", "NetworkKvTransfer", "NetworkSessions", "quantised"]
