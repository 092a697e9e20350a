"""The collectives StrataSim runs: their study names and their Chakra ``CollectiveType`` values."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import ceil
from types import MappingProxyType

from stratasim.v1 import workload_pb2

__all__ = ["COLLECTIVE_TYPES", "COLLECTIVE_NAMES", "uneven_all_to_all_bytes"]

COLLECTIVE_TYPES = MappingProxyType(
    {
        "all_reduce": workload_pb2.ALL_REDUCE,
        "reduce_scatter": workload_pb2.REDUCE_SCATTER,
        "all_gather": workload_pb2.ALL_GATHER,
        "all_to_all": workload_pb2.ALL_TO_ALL,
        "broadcast": workload_pb2.BROADCAST,
        "reduce": workload_pb2.REDUCE,
    }
)
"""Study name of each supported collective -> its ``CollectiveType``."""

COLLECTIVE_NAMES = MappingProxyType({value: name for name, value in COLLECTIVE_TYPES.items()})
"""``CollectiveType`` -> study name, for the supported collectives."""


def uneven_all_to_all_bytes(buffer_bytes: int, peer_shares: Sequence[Fraction]) -> int:
    """The buffer of the even all-to-all that lasts as long as an all-to-all-v in which every one of ``n`` peers
    sends ``buffer_bytes x peer_shares[q]`` to peer ``q`` (the same shares from every sender, as a mixture of
    experts' dispatch and combine have): ``ceil(buffer_bytes n max(peer_shares))``, each message as large as the
    busiest peer's. With the direct algorithm the two take equally long on the analytical network (every message
    flies at once, the largest sets the time) and through a switch on the congestion-aware one (the busiest
    receiver's link carries as much in both); ring and hierarchical algorithms relay the padded shares, an upper
    bound. Even shares (or none) give ``buffer_bytes``, bit for bit."""
    if not peer_shares:
        return buffer_bytes
    return ceil(buffer_bytes * len(peer_shares) * max(peer_shares))
