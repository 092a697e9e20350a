"""Building a serving run's per-layer breakdown (:mod:`stratasim.report.serving_layers`) and its ``layers`` trace
track from its record and its pricers.

Each distinct iteration shape the run priced is split by its pool's pricer into (stage, block, communicator) parts
(:meth:`~stratasim.system_layer.serving.BackendPricer.by_block`) and counted as often as it ran; each expert part
likewise (:meth:`~stratasim.system_layer.serving.BackendPricer.experts_by_block`). An iteration's phase is
``prefill`` (prompt chunks only), ``decode`` (decodes only), ``mixed`` (both: chunked prefill) or ``empty`` (an
expert-parallel member with nothing to run); expert parts, shared by a group whose members may be in different
phases, are phase ``all``. The trace lays each iteration's stage parts out by block on the stage's first NPU
(:func:`_spans`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from stratasim.kernel.serving import Iteration, IterationShape, RequestLevelWorkload, ServingPool
from stratasim.report.serving_layers import ServingLayerRow
from stratasim.system_layer.serving import BackendPricer
from stratasim.system_layer.spans import TraceSpan
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

__all__ = ["phase_of", "serving_layers"]

_PHASES = ("prefill", "decode", "mixed", "empty", "all")
_BLOCKS = ("embedding", "layer", "head", "pipeline", "other")

Key = tuple[int, str, str]
"""A row's pool index, layer and phase."""


def phase_of(shape: IterationShape) -> str:
    """The phase of an iteration of ``shape`` (module docstring)."""
    if shape.chunks:
        return "mixed" if shape.decodes else "prefill"
    return "decode" if shape.decodes else "empty"


class _Parts:
    """Each (pool, shape)'s and expert part's split by block and communicator, asked of the pricers once each."""

    def __init__(self, workload: ServingRequestsWorkload, pricers: Sequence[BackendPricer]) -> None:
        self._workload, self._pricers = workload, pricers
        self._shapes: dict[tuple[int, IterationShape], dict[tuple[int, str, str], int]] = {}
        self._experts: dict[tuple[int, int, int], dict[tuple[str, str], int]] = {}

    def shape(self, pool: int, shape: IterationShape) -> dict[tuple[int, str, str], int]:
        """An iteration of ``shape`` on pool ``pool`` by (stage, block, communicator)."""
        key = (pool, shape)
        if key not in self._shapes:
            iteration = Iteration(shape, self._workload.works(shape, pool))
            self._shapes[key] = self._pricers[pool].by_block(iteration)
        return self._shapes[key]

    def experts(self, pool: int, group: int, member: int) -> dict[tuple[str, str], int]:
        """The expert part of ``group`` tokens, ``member`` on the busiest member, by (layer, communicator)."""
        key = (pool, group, member)
        if key not in self._experts:
            work = self._workload.expert_work(group, member, pool)
            self._experts[key] = self._pricers[pool].experts_by_block(work)
        return self._experts[key]


def serving_layers(
    workload: RequestLevelWorkload,
    pools: Sequence[ServingPool],
    pricers: Sequence[BackendPricer],
    run: PoolRun,
    spans: bool = False,
) -> tuple[tuple[ServingLayerRow, ...], tuple[TraceSpan, ...]]:
    """``run``'s rows (:func:`_rows`) and, with ``spans``, its ``layers`` trace spans (:func:`_spans`); none for a
    workload whose operators are not known (not the ``serving`` workload)."""
    if not isinstance(workload, ServingRequestsWorkload):
        return (), ()
    parts = _Parts(workload, pricers)
    return _rows(pools, parts, run), _spans(pools, parts, run) if spans else ()


def _rows(pools: Sequence[ServingPool], split: _Parts, run: PoolRun) -> tuple[ServingLayerRow, ...]:
    """``run``'s priced time by pool, layer and phase (module docstring), in pool order, then model order (a
    draft model's blocks first), then phase."""
    parts: defaultdict[Key, Counter[str]] = defaultdict(Counter)
    iterations: Counter[tuple[int, str]] = Counter()
    tokens: Counter[tuple[int, str]] = Counter()
    for (pool, shape), times in run.shape_runs.items():
        phase = phase_of(shape)
        iterations[pool, phase] += times
        tokens[pool, phase] += times * shape.tokens
        for (_, block, communicator), ps in split.shape(pool, shape).items():
            parts[pool, block, phase][communicator] += times * ps
    for (pool, group, member), times in run.expert_runs.items():
        iterations[pool, "all"] += times
        tokens[pool, "all"] += times * group
        for (block, communicator), ps in split.experts(pool, group, member).items():
            parts[pool, block, "all"][communicator] += times * ps
    return tuple(
        _row(pools[key[0]].name, key, parts[key], iterations[key[0], key[2]], tokens[key[0], key[2]])
        for key in sorted(parts, key=_order)
    )


def _spans(pools: Sequence[ServingPool], split: _Parts, run: PoolRun) -> tuple[TraceSpan, ...]:
    """The ``layers`` track of each stage's first NPU: each iteration's part on the stage cut into its blocks in
    model order (the activation's transfer into the stage first), each named after its block and the iteration's
    phase; an expert-parallel group's expert part after it, its layers in order."""
    firsts = [npus.start for pool in pools for npus in pool.replica_npus()]
    found: list[TraceSpan] = []
    for record in run.record:
        first, tp = firsts[run.engine_replicas[record.engine]], pools[record.pool].tp
        phase = phase_of(record.shape)
        if record.shape.tokens:
            by_stage: defaultdict[int, Counter[str]] = defaultdict(Counter)
            for (stage, block, _), ps in split.shape(record.pool, record.shape).items():
                by_stage[stage][block] += ps
            ends = (record.experts.own_end_ps,) if record.experts else record.stage_ends_ps
            for stage, end in enumerate(ends):
                found += _laid_out(first + stage * tp, by_stage[stage], end, phase)
        if record.experts is not None:
            step = record.experts
            blocks: Counter[str] = Counter()
            for (block, _), ps in split.experts(record.pool, step.group_tokens, step.member_tokens).items():
                blocks[block] += ps
            found += _laid_out(first, blocks, step.experts_start_ps + sum(blocks.values()), "experts")
    return tuple(found)


def _laid_out(npu: int, blocks: Counter[str], end_ps: int, phase: str) -> list[TraceSpan]:
    """``blocks`` (ps each) one after another in model order on ``npu``'s ``layers`` track, the last ending at
    ``end_ps``."""
    at = end_ps - sum(blocks.values())
    spans = []
    for block in sorted(blocks, key=lambda name: (name != "pipeline", _order((0, name, "all")))):
        spans.append(TraceSpan(npu, "layers", f"{block} {phase}", at, at + blocks[block]))
        at += blocks[block]
    return spans


def _row(pool: str, key: Key, parts: Counter[str], iterations: int, tokens: int) -> ServingLayerRow:
    """The row of ``key`` from its ps by communicator (compute under ``""``), every collective exposed."""
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
