"""What a network that cannot reduce at a switch says when asked to (``SendBatch.reductions``)."""

from __future__ import annotations

from stratasim.kernel.errors import BackendError
from stratasim.v1 import network_pb2

__all__ = ["refuse_switch_reduction"]


def refuse_switch_reduction(backend: str, sends: network_pb2.SendBatch) -> None:
    """Raise :class:`BackendError` when ``sends`` asks ``backend`` (a network that cannot) to reduce at a switch."""
    if sends.reductions:
        dim = sends.reductions[0].dimension
        raise BackendError(
            f"network backend {backend!r} cannot reduce at a switch: dimension {dim} has in_network_reduction: true "
            "and system.algorithm: nccl picked NVLS or CollNet on it, whose switch reduces; use the analytical or "
            "congestion_aware network there, drop in_network_reduction, or force another algorithm (system.nccl)"
        )
