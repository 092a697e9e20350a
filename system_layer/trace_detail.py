"""How much of a run a trace shows (:class:`TraceDetail`), apart from the recorder (:mod:`.trace`) so that the
command line offers the choices without importing the engine."""

from enum import StrEnum

__all__ = ["AUTO_NODE_LIMIT", "TraceDetail"]


class TraceDetail(StrEnum):
    """How much of a run a trace shows: every node's span (``nodes``: compute, collectives and their phases,
    memory counters); the same but one span per run of a block run whole (``blocks``: a layer's pass in a
    model-built workload, with the memory it holds after); the collectives only (``collectives``: one span per
    collective issued by an NPU); or ``auto``: ``nodes``, unless the NPUs traced run more than
    :data:`AUTO_NODE_LIMIT` nodes and some of their blocks run whole, then ``blocks``."""

    NODES = "nodes"
    BLOCKS = "blocks"
    COLLECTIVES = "collectives"
    AUTO = "auto"


# Node spans a trace shows by default (``auto``): about 25 MB of Chrome trace, written in well under a second.
AUTO_NODE_LIMIT = 200_000
