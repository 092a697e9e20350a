"""ASTRA-sim 2.x semantics, for the ``astra_compat`` preset (see ``shared/reference/ASTRA-SIM-SEMANTICS.md``).

Where ASTRA-sim's analytical model differs from StrataSim's default, the preset follows ASTRA-sim so that a
study converted from its inputs reproduces its numbers:

- network times are truncated to whole nanoseconds (the network is told so through the topology);
- reducing ``m`` bytes costs ``3 * floor(m / local-mem-bw)`` ns, bandwidth in GB/s of 10^9 bytes;
- every phase of a chunk ends one more endpoint delay after its last step, holding its dimension meanwhile;
- an all-gather's size is each NPU's input, not the gathered buffer;
- a ring all-to-all is N(N-1)/2 relay steps of one share each, not N-1 steps of shrinking batches;
- a direct step reduces the messages it received in parallel: one reduction of one message's size;
- halving-doubling charges no reduction for the first message it sends: its reduce-scatter half reduces
  after each exchange but the last, each time the size of the next message;
- halving-doubling pairs its largest message with its nearest partner: the halving starts 1 position away
  and doubles the distance, the doubling starts n/2 away and halves it (ours starts the halving n/2 away);
- a multi-dimensional all-gather runs its dimensions from the outermost inwards (:func:`phase_lines`);
- a double binary tree sends each chunk whole over every edge of one tree, the chunks taking ASTRA-sim's two
  trees in turn (ours splits every chunk in halves over NCCL's two trees; see :mod:`.astra_tree`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache

from stratasim.system_layer.collectives import astra_tree
from stratasim.system_layer.collectives.algorithms import PhasePlan
from stratasim.system_layer.collectives.groups import PhaseLines
from stratasim.system_layer.collectives.steps import Step, lockstep

__all__ = ["NS_PS", "reduction_ps", "ring_all_to_all", "buffer_bytes", "adapt", "phase_lines"]

NS_PS = 1000
"""ASTRA-sim's time unit, the nanosecond, in picoseconds."""


def reduction_ps(size: int, local_mem_bandwidth: int) -> int:
    """Time to reduce ``size`` bytes: one write and two reads at ``local_mem_bandwidth`` bytes/s, whole ns."""
    return 3 * (size * 10**9 // local_mem_bandwidth) * NS_PS


def ring_all_to_all(n: int, data_bytes: int) -> tuple[Step, ...]:
    """ASTRA-sim's ring all-to-all: every share is relayed around the ring as its own step."""
    share = max(1, data_bytes // n)
    return lockstep([Step((1,), share, 1) for _ in range(n * (n - 1) // 2)])


def buffer_bytes(collective: str, size: int, group_size: int) -> int:
    """The buffer per NPU StrataSim plans for an ASTRA-sim collective of ``size`` (an all-gather's is the input)."""
    return size * group_size if collective == "all_gather" else size


def adapt(plan: PhasePlan, chunk: int = 0) -> PhasePlan:
    """``plan`` (for chunk number ``chunk`` of its collective) with ASTRA-sim's variant of its algorithm, where it
    has one."""
    if plan.base == "double_binary_tree":
        return replace(plan, _planner=astra_tree.planner(plan.size, chunk))
    if (plan.collective, plan.base) == ("all_to_all", "ring"):
        steps = ring_all_to_all(plan.size, plan.data_bytes)
        return replace(plan, _planner=lambda *_: steps)
    if plan.base == "direct":
        return replace(plan, _planner=_direct_once(plan))
    if plan.base == "halving_doubling":
        return replace(plan, _planner=_halving_doubling(plan))
    return plan


def phase_lines(collective: str, lines: tuple[PhaseLines, ...]) -> tuple[PhaseLines, ...]:
    """The dimensions a chunk of ``collective`` walks, in ASTRA-sim's order.

    Sys::generate_collective (astra-sim/system/Sys.cc) reverses its ``dim_mapper`` for an All_Gather: the
    all-gather starts on the outermost dimension, each later phase gathering the grown buffer on an inner one.
    """
    return tuple(reversed(lines)) if collective == "all_gather" else lines


def _direct_once(plan: PhasePlan) -> Callable[..., tuple[Step, ...]]:
    @cache  # one plan per position, as the default planners keep theirs
    def steps(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
        return tuple(replace(s, reduce_bytes=s.bytes) if s.reduces else s for s in plan.steps_for(position))

    return steps


def _halving_doubling(plan: PhasePlan) -> Callable[..., tuple[Step, ...]]:
    @cache  # one plan per position, as the default planners keep theirs
    def steps(collective: str, n: int, data_bytes: int, position: int) -> tuple[Step, ...]:
        # HalvingDoubling.cc: reduce-scatter and all-reduce start with rank_offset 1 and data/2, doubling the
        # offset as the message halves; all-gather starts with rank_offset n/2 and the smallest message. The
        # partner is position XOR offset (specify_direction). Ours runs the distances the other way round, so the
        # exchange at distance d becomes the one at distance n / 2d, its message unchanged.
        default = [
            replace(step, offsets=_partner(position, n // (2 * abs(step.offsets[0]))))
            for step in plan.steps_for(position)
        ]
        if collective == "all_gather":
            return tuple(default)
        halving = n.bit_length() - 1
        adapted = []
        for index, step in enumerate(default):
            if index < halving - 1:
                adapted.append(replace(step, reduce_bytes=default[index + 1].bytes))
            elif index == halving - 1:
                adapted.append(replace(step, reduces=False))
            else:
                adapted.append(step)
        return tuple(adapted)

    return steps


def _partner(position: int, distance: int) -> tuple[int]:
    """The offset of ``position``'s halving-doubling partner ``distance`` away: position XOR distance."""
    return ((position ^ distance) - position,)
