"""Context parallelism's plan: which CP plans are possible, and how the CP group splits into Ulysses' all-to-all
groups and ring attention's rings.

The four ``cp_comm_type`` values, as Transformer Engine names them, are one shape with two degrees: the CP group of
``cp`` ranks splits into groups of ``a`` consecutive members (Megatron-core's ``hierarchical_context_parallel_sizes
[a, cp / a]``: the inner level, e.g. within a node) and rings of the ``r = cp / a`` members at the same place in
each (the outer level). The attention core's queries, keys and values are all-to-all'd within the inner group
(DeepSpeed-Ulysses: each rank then holds ``1 / a`` of its heads over the inner group's tokens), the core runs as
ring attention over the outer ring (or, for ``r = 1``, one fused kernel over the whole sequence), and its output is
all-to-all'd back. ``p2p`` is ``a = 1``, ``a2a`` is ``a = cp``, ``a2a+p2p`` takes ``a`` from ``cp_a2a``;
``all_gather`` gathers the keys and values over the whole group instead of a ring (``a = 1``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stratasim.workload_layer.transformer.config import ModelConfig, ParallelismConfig

__all__ = ["check_context_parallel", "ulysses_ranks", "ulysses_group", "ring_group"]


def ulysses_ranks(plan: ParallelismConfig) -> int:
    """The size ``a`` of the CP group's all-to-all (inner) groups: ``cp`` for ``a2a``, ``cp_a2a`` for
    ``a2a+p2p``, else 1."""
    if plan.cp_comm_type == "a2a":
        return plan.cp
    return (plan.cp_a2a or 1) if plan.cp_comm_type == "a2a+p2p" else 1


def ulysses_group(context_group: tuple[int, ...], npu: int, ranks: int) -> tuple[int, ...]:
    """The ``ranks`` consecutive members of ``context_group`` (the CP group in ring order) holding ``npu``: its
    all-to-all group."""
    start = context_group.index(npu) // ranks * ranks
    return context_group[start : start + ranks]


def ring_group(context_group: tuple[int, ...], npu: int, ranks: int) -> tuple[int, ...]:
    """The members of ``context_group`` at ``npu``'s place in every all-to-all group of ``ranks``, in ring
    order: its ring."""
    return context_group[context_group.index(npu) % ranks :: ranks]


def check_context_parallel(model: ModelConfig, plan: ParallelismConfig, attention: str) -> None:
    """Raise a ValueError naming the keys when ``plan``'s context parallelism cannot run ``model``."""
    if plan.cp_a2a is not None and plan.cp_comm_type != "a2a+p2p":
        raise ValueError(
            f"parallelism.cp_a2a ({plan.cp_a2a}) is the all-to-all size of hierarchical context parallelism: set "
            "parallelism.cp_comm_type: a2a+p2p, or leave cp_a2a out"
        )
    if plan.cp_comm_type == "a2a+p2p" and (plan.cp_a2a is None or plan.cp % plan.cp_a2a):
        raise ValueError(
            f"parallelism.cp_comm_type: a2a+p2p needs parallelism.cp_a2a, the all-to-all group's size, dividing "
            f"parallelism.cp ({plan.cp}); got {plan.cp_a2a}"
        )
    if plan.cp == 1:
        return
    ulysses = ulysses_ranks(plan)
    if ulysses > 1:
        for count, key in ((model.heads, "model.heads"), (model.kv_head_count, "model.kv_heads")):
            if count % (plan.tp * ulysses):
                by = "parallelism.cp" if plan.cp_comm_type == "a2a" else "parallelism.cp_a2a"
                raise ValueError(
                    f"{key} ({count}) must be divisible by parallelism.tp * {by} ({plan.tp * ulysses}) "
                    f"with cp_comm_type: {plan.cp_comm_type}: its all-to-alls hand each CP rank whole heads"
                )
    if model.seq_len % (2 * plan.cp):
        raise ValueError(
            f"model.seq_len ({model.seq_len}) must be divisible by 2 * parallelism.cp ({2 * plan.cp}): context "
            "parallelism splits the sequence into 2 cp chunks, two per rank"
        )
    if plan.sequence_parallel and model.seq_len // plan.cp % plan.tp:
        raise ValueError(
            f"model.seq_len / parallelism.cp ({model.seq_len // plan.cp}) must be divisible by parallelism.tp "
            f"({plan.tp}) with sequence_parallel"
        )
    if attention != "fused":
        raise ValueError(f"parallelism.cp ({plan.cp}) runs its attention over the fused kernel: set attention: fused")
