"""One iteration of a replica: its bucketed shape (what the scheduler batched) and the operators the shape runs.

The simulation (:mod:`stratasim.workload_layer.serving.simulation`) is pure: it never prices anything itself but
hands each iteration's typed work (:class:`~stratasim.kernel.serving.Iteration`) to the
:class:`~stratasim.kernel.serving.IterationPricer` it is given (the system layer's,
:mod:`stratasim.system_layer.serving`, wired by the composition root), and caches its answers by shape. Shapes are bucketed so that a long run asks for few distinct ones: prompt chunks and their contexts, and
the decodes' mean context, are rounded up to a multiple of the study's ``bucket`` tokens when above it (a decode
step's attention reads every cached key once, so its cost follows the summed context: ``n`` decodes at their
mean context cost what they cost apart, to the rounding).

Under expert parallelism an iteration has two parts: a replica's own (:func:`iteration_work` without the experts,
priced by its iteration pricer) and its group's (:func:`expert_work`: the local experts on the group's tokens and
the all-to-alls, priced by an :class:`~stratasim.kernel.serving.ExpertPricer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from stratasim.kernel.serving import (
    Compute,
    ExpertAllToAll,
    ExpertWork,
    IterationShape,
    IterationWork,
    Step,
)
from stratasim.workload_layer.inference.layer_operators import DecoderOperators
from stratasim.workload_layer.transformer.expert_placement import LayerPlacement

__all__ = ["iteration_shape", "iteration_work", "round_up", "expert_work"]


def round_up(tokens: int, bucket: int) -> int:
    """``tokens``, or above ``bucket`` the next multiple of it."""
    return tokens if tokens <= bucket else -(-tokens // bucket) * bucket


def iteration_shape(
    chunks: list[tuple[int, int]], decode_contexts: list[int], samples: int, bucket: int, queries: int = 1
) -> IterationShape:
    """The bucketed shape of an iteration running prompt ``chunks`` (new tokens, context after) and decodes of
    ``queries`` tokens at ``decode_contexts`` (context after each one's new tokens)."""
    rounded = tuple(sorted((round_up(tokens, bucket), round_up(context, bucket)) for tokens, context in chunks))
    decodes = len(decode_contexts)
    mean = -(-sum(decode_contexts) // decodes) if decodes else 0
    return IterationShape(rounded, decodes, round_up(mean, bucket), samples, queries if decodes else 1)


def iteration_work(
    operators: DecoderOperators, pp: int, shape: IterationShape, with_experts: bool = True
) -> IterationWork:
    """The operators ``shape`` runs on each of ``pp`` stages: the embedding on the first, every layer (dense or a
    mixture of experts, its experts left out without ``with_experts``) with one attention core per group of identical
    chunks and one for the decodes, the head over the ``samples`` sequences on the last (every position a decode
    verifies, under speculative decoding)."""
    model, tokens = operators.model, shape.tokens
    core: tuple[Compute, ...] = ()
    for (new, context), count in sorted(Counter(shape.chunks).items()):
        core += operators.attention_core(count, new, context)
    if shape.decodes:
        core += operators.attention_core(shape.decodes, shape.queries, shape.decode_context)
    per_stage = model.layers // pp
    stages, blocks = [], []
    for stage in range(pp):
        layers = range(stage * per_stage, (stage + 1) * per_stage)
        moe = tuple(f"layer{index}" for index in layers if model.moe_layer(index))
        dense = tuple(f"layer{index}" for index in layers if not model.moe_layer(index))
        steps: list[tuple[tuple[str, ...], Step]] = []
        if stage == 0:
            steps += [(("embedding",), step) for step in operators.embedding(tokens)]
        if moe:
            steps += [(moe, step) for step in operators.layer(tokens, core, operators.moe(tokens, with_experts))]
        if dense:
            steps += [(dense, step) for step in operators.layer(tokens, core)]
        if stage == pp - 1 and shape.samples:
            steps += [(("head",), step) for step in operators.head(shape.samples + shape.decodes * (shape.queries - 1))]
        stages.append(tuple((len(names), step) for names, step in steps))
        blocks.append(tuple(names for names, _ in steps))
    boundary = tokens * model.hidden * operators.element_bytes
    return IterationWork(tuple(stages), boundary, operators.tp, tuple(blocks))


def expert_work(
    operators: DecoderOperators,
    layers: Sequence[tuple[LayerPlacement, tuple[str, ...]]],
    group_tokens: int,
    member_tokens: int,
) -> ExpertWork:
    """The expert part of an iteration of an expert-parallel group (:class:`~stratasim.kernel.serving.ExpertWork`),
    for every mixture-of-experts layer (``layers``: each distinct placement over the group's ``ep`` members and the
    names of the layers that have it): the busiest member's experts on their share of the group's ``group_tokens`` tokens,
    between the dispatch and the combine all-to-all, each member sending ``top_k`` hidden vectors per token of its
    own, the largest ``member_tokens`` (the slowest sender bounds an all-to-all), to each member by its experts'
    share of the tokens."""
    model = operators.model
    assignments = model.top_k * group_tokens
    size = member_tokens * model.top_k * model.hidden * operators.element_bytes
    steps: list[tuple[tuple[str, ...], Compute | ExpertAllToAll]] = []
    for placement, names in layers:
        shares = placement.rank_shares
        steps += [
            (names, ExpertAllToAll("moe dispatch all-to-all", size, shares)),
            *((names, step) for step in operators.expert_mlps(placement.busiest(assignments))),
            (names, ExpertAllToAll("moe combine all-to-all", size, shares)),
        ]
    return ExpertWork(
        group_tokens,
        member_tokens,
        len(layers[0][0].ranks),
        tuple((len(names), step) for names, step in steps),
        tuple(names for names, _ in steps),
    )
