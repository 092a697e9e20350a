"""Pipeline schedules: the order in which a stage runs its forward and backward passes (GPipe, 1F1B,
Megatron-LM's interleaved 1F1B, the zero-bubble ZB-H1, ZB-H2 and ZB-V, DualPipe and DualPipeV), where its model chunks sit along the
model, and the tags of the messages between stages.

A pass is one model chunk's forward or backward pass (or half of it: :mod:`~stratasim.workload_layer.transformer.
schedule_passes`) over one micro-batch; a stage holds ``chunks`` model chunks (one under GPipe, 1F1B, ZB-H1 and ZB-H2).
:mod:`stratasim.workload_layer.transformer.training_graph` emits the passes in this order as one chain of
dependencies.

Where chunks sit (:data:`Placement`): ``loop`` (the interleaved schedule's), stage ``p``'s chunk ``c`` is the
model's chunk ``c stages + p``; ``v`` (ZB-V, DualPipeV), stage ``p`` holds the model's chunks ``p`` and ``2 stages - 1 - p``;
``dual`` (DualPipe), two copies of a model in ``stages`` chunks, stage ``p`` holding chunk ``p`` of the first
(local chunk 0) and chunk ``stages - 1 - p`` of the second (local chunk 1), each copy's micro-batches going
through its own chunks only.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal, TypeAlias

from stratasim.workload_layer.transformer.dualpipe import dualpipe_order, dualpipev_order
from stratasim.workload_layer.transformer.schedule_passes import Direction, Pass
from stratasim.workload_layer.transformer.zero_bubble import PassTimes, v_stage, zb_h1_order, zb_h2_order, zb_v_order

__all__ = [
    "Direction",
    "Pass",
    "Placement",
    "pipeline_order",
    "message_tag",
    "placement",
    "chunk_positions",
    "neighbour_chunk",
]

Placement: TypeAlias = Literal["loop", "v", "dual"]
"""Where a stage's model chunks sit along the model; see the module docstring."""


def placement(schedule: str) -> Placement:
    """The placement of ``schedule``'s chunks: ``v`` for ZB-V and DualPipeV, ``dual`` for DualPipe, else
    ``loop``."""
    return "v" if schedule in ("zb_v", "dualpipev") else "dual" if schedule == "dualpipe" else "loop"


def chunk_positions(where: Placement, stage: int, stages: int, chunks: int) -> tuple[int, ...]:
    """The model chunk each of ``stage``'s ``chunks`` local chunks runs (an index into the model's chunks:
    ``stages * chunks`` of them, or ``stages`` per copy under ``dual``)."""
    if where == "v":
        return (stage, 2 * stages - 1 - stage)
    if where == "dual":
        return (stage, stages - 1 - stage)
    return tuple(chunk * stages + stage for chunk in range(chunks))


def neighbour_chunk(
    where: Placement, stage: int, chunk: int, stages: int, chunks: int, offset: int
) -> tuple[int, int] | None:
    """The stage and local chunk of the model chunk ``offset`` (+1 or -1) away from ``stage``'s local ``chunk``
    along its model (its copy's, under ``dual``); None past either end."""
    position = chunk_positions(where, stage, stages, chunks)[chunk] + offset
    if not 0 <= position < (stages if where == "dual" else stages * chunks):
        return None
    if where == "v":
        return v_stage(position, stages)
    if where == "dual":
        return (position, 0) if chunk == 0 else (stages - 1 - position, 1)
    chunk_of, stage_of = divmod(position, stages)
    return stage_of, chunk_of


@lru_cache(maxsize=1024)
def pipeline_order(
    schedule: str, stage: int, stages: int, micro_batches: int, chunks: int = 1, times: PassTimes = ()
) -> tuple[Pass, ...]:
    """The order in which ``stage`` (of ``stages``) runs the forward and backward passes of its ``chunks`` model
    chunks over ``micro_batches`` micro-batches; ``times``, ZB-H2's and ZB-V's pass times per model chunk for
    their greedy orders (empty: equal).

    Every schedule runs some warm-up forward passes, then one forward and one backward pass alternately, then the
    remaining backward passes:

    - ``gpipe``: every forward pass is a warm-up pass;
    - ``1f1b`` (PipeDream-Flush, Narayanan et al. 2021): ``stages - stage - 1`` warm-up passes, so at most
      ``stages - stage`` micro-batches' activations are live at a time;
    - ``interleaved`` (Narayanan et al., SC'21, section 2.2.2; Megatron-LM's
      ``forward_backward_pipelining_with_interleaving``): the ``chunks * micro_batches`` passes take micro-batches
      in groups of ``stages`` through each chunk in turn (backward passes from the last chunk);
      ``(stages - stage - 1) * 2 + (chunks - 1) * stages`` warm-up passes, capped at the total, and all of them
      when ``micro_batches == stages``. ``micro_batches`` must be a multiple of ``stages``;
    - ``zb_h1``, ``zb_h2`` and ``zb_v`` (:mod:`~stratasim.workload_layer.transformer.zero_bubble`), ``dualpipe`` and
      ``dualpipev`` (:mod:`~stratasim.workload_layer.transformer.dualpipe`, two chunks per stage) split backward
      passes into ``input`` and ``weight`` passes.
    """
    if schedule == "interleaved":
        return _interleaved_order(stage, stages, micro_batches, chunks)
    two_chunks = {"zb_v": zb_v_order, "dualpipe": dualpipe_order, "dualpipev": dualpipev_order}
    if schedule in two_chunks:
        if chunks != 2:
            raise ValueError(f"the {schedule} schedule runs two model chunks per stage, not {chunks}")
        return (
            zb_v_order(stage, stages, micro_batches, times)
            if schedule == "zb_v"
            else two_chunks[schedule](stage, stages, micro_batches)
        )
    if chunks != 1:
        raise ValueError(f"the {schedule} schedule runs one model chunk per stage, not {chunks}")
    forward = [Pass("forward", 0, i) for i in range(micro_batches)]
    backward = [Pass("backward", 0, i) for i in range(micro_batches)]
    if schedule == "gpipe":
        return _one_forward_one_backward(forward, backward, micro_batches)
    if schedule == "1f1b":
        return _one_forward_one_backward(forward, backward, min(stages - stage - 1, micro_batches))
    if schedule == "zb_h1":
        return zb_h1_order(stage, stages, micro_batches)
    if schedule == "zb_h2":
        return zb_h2_order(stage, stages, micro_batches, times)
    raise ValueError(
        f"unknown pipeline schedule {schedule!r}; expected gpipe, 1f1b, interleaved, zb_h1, zb_h2, zb_v, dualpipe or "
        "dualpipev"
    )


def _interleaved_order(stage: int, stages: int, micro_batches: int, chunks: int) -> tuple[Pass, ...]:
    """Megatron-LM's interleaved 1F1B order; see :func:`pipeline_order`."""
    if micro_batches % stages:
        raise ValueError(
            f"the interleaved schedule needs micro-batches ({micro_batches}) divisible by stages ({stages})"
        )
    total = chunks * micro_batches
    warmup = total if micro_batches == stages else min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    forward = [_interleaved_pass("forward", k, stages, chunks) for k in range(total)]
    backward = [_interleaved_pass("backward", k, stages, chunks) for k in range(total)]
    return _one_forward_one_backward(forward, backward, warmup)


def _interleaved_pass(direction: Direction, index: int, stages: int, chunks: int) -> Pass:
    """The ``index``-th forward or backward pass of the interleaved schedule (Megatron's ``get_model_chunk_id``):
    each group of ``stages * chunks`` passes takes ``stages`` micro-batches through every chunk in turn."""
    group, position = divmod(index, stages * chunks)
    chunk = position // stages
    if direction == "backward":
        chunk = chunks - 1 - chunk
    return Pass(direction, chunk, group * stages + position % stages)


def _one_forward_one_backward(forward: Sequence[Pass], backward: Sequence[Pass], warmup: int) -> tuple[Pass, ...]:
    """``warmup`` forward passes, then one forward and one backward pass alternately, then the remaining backward
    passes (the backward passes in the order given)."""
    steady = len(forward) - warmup
    order = list(forward[:warmup])
    for i in range(steady):
        order += [forward[warmup + i], backward[i]]
    return (*order, *backward[steady:])


def message_tag(direction: Direction, chunk: int, micro_batch: int, chunks: int) -> int:
    """The tag of the point-to-point message carrying ``micro_batch``'s activation (forward) or gradient
    (backward or input pass) out of the sender's model ``chunk`` (of ``chunks`` per stage); unique per (chunk,
    micro-batch, direction), and the sender's id tells the stage boundary apart."""
    return 2 * (micro_batch * chunks + chunk) + (direction != "forward")
