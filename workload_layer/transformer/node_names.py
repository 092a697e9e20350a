"""Where a node of a transformer training graph belongs, read from the name the graph emitter gives it.

:mod:`stratasim.workload_layer.transformer.training_graph` names a pass of a block ``mb<m> <block>`` (the block
node; a block is ``layer<i>``, ``embedding`` or ``head``) and the nodes of the pass by what they run, led by the
pass: ``fwd``, ``bwd`` or ``recompute`` (full recomputation), ``bwd recompute`` (selective recomputation); ZeRO-3's
per-block gathers and scatters carry the same ``mb<m> <block> fwd|bwd`` prefix. The rest lies outside the blocks:
``mb<m> chunk<c> recv|send forward|backward`` (pipeline transfers), ``dp ... gradient ...`` and ``... parameter
all-gather`` (the data-parallel reductions) and ``optimizer step``. A node's full name, as traces and
:class:`~stratasim.system_layer.result.NodeTime` give it, is its block node's name then its own.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Place", "place_of", "pass_span", "OUTSIDE"]

OUTSIDE = ("pipeline", "data parallel", "optimizer", "other")
"""The rows outside the model's blocks, in report order: pipeline transfers and the idle time waiting on them (the
bubbles), the data-parallel gradient reductions, the optimizer step, and what no node names (idle time with no
communication to charge, nodes of other workloads)."""

_IN_BLOCK = re.compile(r"mb(\d+) (layer\d+|embedding|head) (fwd|bwd|recompute)( recompute)? ")
_BLOCK_NODE = re.compile(r"mb\d+ (layer\d+|embedding|head)")
_PASSES = {"fwd": "forward", "bwd": "backward", "recompute": "recompute"}
_PIPELINE = re.compile(r"mb\d+ chunk\d+ (recv|send) (forward|backward)")


class Place(NamedTuple):
    """A node's block (``layer<i>``, ``embedding``, ``head``, or one of :data:`OUTSIDE`) and pass (``forward``,
    ``backward``, ``recompute``; "" outside the passes of blocks, except pipeline transfers, which carry the pass
    they feed)."""

    block: str
    pass_: str


def place_of(name: str) -> Place:
    """Where the node of full name ``name`` belongs (see the module docstring)."""
    block = _IN_BLOCK.match(name)
    if block is not None:
        return Place(block[2], "recompute" if block[4] else _PASSES[block[3]])
    pipeline = _PIPELINE.match(name)
    if pipeline is not None:
        return Place("pipeline", pipeline[2])
    if name.startswith("dp ") or name.startswith("dp expert "):
        return Place("data parallel", "")
    if name == "optimizer step":
        return Place("optimizer", "")
    return Place("other", "")


def pass_span(name: str) -> str | None:
    """The pass of one micro-batch through one block that the node of full name ``name`` runs in, as a trace
    names its span (``mb3 layer5 forward``; a block node traced whole, ``mb3 layer5``, is its own pass); None
    outside the blocks' passes."""
    block = _IN_BLOCK.match(name)
    if block is None:
        return name if _BLOCK_NODE.fullmatch(name) else None
    return f"mb{block[1]} {block[2]} {'recompute' if block[4] else _PASSES[block[3]]}"
