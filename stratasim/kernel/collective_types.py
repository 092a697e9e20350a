"""The collectives StrataSim runs: their study names and their Chakra ``CollectiveType`` values."""

from __future__ import annotations

from types import MappingProxyType

from stratasim.v1 import workload_pb2

__all__ = ["COLLECTIVE_TYPES", "COLLECTIVE_NAMES"]

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
