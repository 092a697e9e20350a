"""Building a serving run's per-layer breakdown (:mod:`stratasim.report.serving_layers`) from its record and its
pricers.

Each distinct iteration shape the run priced is split by its pool's pricer into (block, communicator) parts
(:meth:`~stratasim.system_layer.serving.BackendPricer.by_block`) and counted as often as it ran; each expert part
likewise (:meth:`~stratasim.system_layer.serving.BackendPricer.experts_by_block`). An iteration's phase is
``prefill`` (prompt chunks only), ``decode`` (decodes only), ``mixed`` (both: chunked prefill) or ``empty`` (an
expert-parallel member with nothing to run); expert parts, shared by a group whose members may be in different
phases, are phase ``all``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from stratasim.kernel.serving import Iteration, IterationShape, RequestLevelWorkload, ServingPool
from stratasim.report.serving_layers import ServingLayerRow
from stratasim.system_layer.serving import BackendPricer
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

__all__ = ["phase_of", "serving_layer_rows"]

_PHASES = ("prefill", "decode", "mixed", "empty", "all")
_BLOCKS = ("embedding", "layer", "head", "pipeline", "other")

Key = tuple[int, str, str]
"""A row's pool index, layer and phase."""


def phase_of(shape: IterationShape) -> str:
    """The phase of an iteration of ``shape`` (module docstring)."""
    if shape.chunks:
        return "mixed" if shape.decodes else "prefill"
    return "decode" if shape.decodes else "empty"


def serving_layer_rows(
    workload: RequestLevelWorkload, pools: Sequence[ServingPool], pricers: Sequence[BackendPricer], run: PoolRun
) -> tuple[ServingLayerRow, ...]:
    """``run``'s priced time by pool, layer and phase (module docstring), in pool order, then model order (a
    draft model's blocks first), then phase; none for a workload whose operators are not known (not the
    ``serving`` workload)."""
    if not isinstance(workload, ServingRequestsWorkload):
        return ()
    parts: defaultdict[Key, Counter[str]] = defaultdict(Counter)
    iterations: Counter[tuple[int, str]] = Counter()
    tokens: Counter[tuple[int, str]] = Counter()
    for (pool, shape), times in run.shape_runs.items():
        phase = phase_of(shape)
        iterations[pool, phase] += times
        tokens[pool, phase] += times * shape.tokens
        by_block = pricers[pool].by_block(Iteration(shape, workload.works(shape, pool)))
        _add(parts, pool, phase, by_block, times)
    for (pool, group, member), times in run.expert_runs.items():
        iterations[pool, "all"] += times
        tokens[pool, "all"] += times * group
        _add(parts, pool, "all", pricers[pool].experts_by_block(workload.expert_work(group, member, pool)), times)
    return tuple(
        _row(pools[key[0]].name, key, parts[key], iterations[key[0], key[2]], tokens[key[0], key[2]])
        for key in sorted(parts, key=_order)
    )


def _add(
    parts: defaultdict[Key, Counter[str]], pool: int, phase: str, by_block: dict[tuple[str, str], int], times: int
) -> None:
    """Add ``times`` runs of ``by_block`` (ps by block and communicator) to ``parts``."""
    for (block, communicator), ps in by_block.items():
        parts[pool, block, phase][communicator] += times * ps


def _row(pool: str, key: Key, parts: Counter[str], iterations: int, tokens: int) -> ServingLayerRow:
    comm = {label: ps for label, ps in sorted(parts.items()) if label}
    total = sum(comm.values())
    by_communicator = tuple((label, ps, ps) for label, ps in comm.items())
    return ServingLayerRow(pool, key[1], key[2], iterations, tokens, parts[""], total, total, by_communicator)


def _order(key: Key) -> tuple[int, int, int, int, int]:
    """Pool, then draft blocks before the target's, model order (embedding, layers, head, the pipeline's
    transfers, the rest), then phase."""
    pool, block, phase = key
    draft = block.startswith("draft ")
    name = block.removeprefix("draft ")
    layer = re.fullmatch(r"layer(\d+)", name)
    rank = _BLOCKS.index("layer") if layer else (_BLOCKS.index(name) if name in _BLOCKS else len(_BLOCKS))
    return pool, 0 if draft else 1, rank, int(layer[1]) if layer else 0, _PHASES.index(phase)
