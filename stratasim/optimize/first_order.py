"""The first-order model of a transformer training plan: its iteration time and memory per NPU in closed form,
vectorised over plans (``docs/explanation/first-order-model.md``).

Each distinct layer, embedding and head is priced once through the engine's own operator pricer and the
system layer's closed-form collectives (:mod:`stratasim.optimize.first_order_plan`); the plans are then composed
with numpy. With ``m`` micro-batches per pipeline, ``v`` model chunks per stage, ``pp`` stages, ``w_s`` one
micro-batch's passes through stage ``s`` (its layers', the embedding's on the first, the head's on the last, and the
TP all-gathers of received boundaries under scatter/gather), ``k_s`` one chunk's pass (``1 / v`` of the layers and
gathers, the embedding's or head's whole) and ``c_s`` the transfer from stage ``s`` to the next (``c_wrap`` from
the last stage to the first):

- pipeline: ``T_pipe = m max_s w_s + (sum_s k_s - k_busiest) + 2 (v sum_{s < pp-1} c_s + (v - 1) c_wrap)``: the
  busiest stage's work, the bubble of ``pp - 1`` chunk passes (``(pp - 1) / v`` stage passes interleaved:
  Narayanan et al., SC'21, section 2.2), and the fill and the drain, which cross every chunk boundary; interleaved,
  while every transfer fits under a chunk's forward and backward pass
  (:func:`~stratasim.optimize.first_order_plan.transfers_hidden`; beyond it the plan is declined);
- gradients and optimizer: each stage reduces its one gradient bucket over its DP group once its last backward
  pass ends, ``s (b + c)`` before the first stage's (``b`` a chunk's backward pass), then runs its optimizer step;
  the iteration ends with the last: ``T = T_pipe + max_s(-s (b + c) + R_s + O_s)``, with ``R_s`` the all-reduce
  (ZeRO 0) or the reduce-scatter followed by ``max(all-gather, O_s)`` (ZeRO 1 and 2: the step waits for the
  scatter only);
- ZeRO 3: each block's passes carry their gathers and scatters
  (:func:`~stratasim.optimize.first_order_passes.with_zero3`, an approximation), nothing is left after the
  pipeline but the optimizer step;
- ZB-H1, ZB-H2, ZB-V, DualPipe, DualPipeV (:data:`~stratasim.optimize.first_order_plan.SPLIT`): no closed form; the pipeline is
  walked pass by pass in the schedule's order (:func:`~stratasim.optimize.first_order_walk.stage_ends`), each
  stage's reduction starting after its own last weight pass;
- memory: the builder's ``stage_memory``, the largest over the stages.

Context parallelism, HSDP and mixtures of experts change the passes and groups, not these formulas
(:mod:`stratasim.optimize.first_order_passes`, :mod:`stratasim.optimize.first_order_plan`); with experts, or with
gradient buckets, ``R_s`` is when the stage's last reduction ends after its last pass, the collectives queued as the
NPU runs them (:mod:`stratasim.optimize.first_order_queues`).

The terms of :data:`TERMS` sum to the iteration time exactly: the busiest stage's work split by kind, the bubble,
the pipeline transfers, and the tail after the pipeline split into the exposed DP communication and the first
stage's optimizer step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from stratasim.kernel.errors import StrataSimError
from stratasim.optimize.first_order_groups import GroupTimer
from stratasim.optimize.first_order_passes import BlockTimes
from stratasim.optimize.first_order_plan import (
    SPLIT,
    TRANSFERS_EXPOSED,
    PlanFigures,
    PlanPricer,
    transfers_hidden,
    unsupported,
)
from stratasim.optimize.first_order_walk import stage_ends
from stratasim.study.compute_setup import open_pricer
from stratasim.study.shard_casts import with_shard_casts
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.pipeline_schedule import chunk_positions, placement

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = [
    "TERMS",
    "MEMORY_TERMS",
    "FirstOrderError",
    "FirstOrderModel",
    "PlanDeclined",
    "PlanEstimates",
    "compose",
    "estimate_plans",
]

TERMS = (
    "forward_compute",
    "backward_compute",
    "recompute",
    "tp_comm",
    "embedding_head",
    "pipeline_bubble",
    "pipeline_p2p",
    "dp_comm",
    "optimizer_step",
)
"""The named terms of a plan's iteration time, in ps; they sum to it."""

MEMORY_TERMS = ("weights", "gradients", "optimizer", "activations")
"""The peak stage's memory per NPU by kind, in bytes; they sum to the peak."""

_PLAN = "workload.parallelism."


class FirstOrderError(StrataSimError):
    """A study or plan the first-order model cannot estimate; the message says which and why."""


class PlanDeclined(FirstOrderError):
    """One plan the first-order model cannot estimate; ``reason`` says why, without the plan (the same words for
    every plan declined for the same reason)."""

    def __init__(self, plan: Mapping[str, Any], reason: str) -> None:
        super().__init__(f"plan {dict(plan)}: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class PlanEstimates:
    """The first-order estimates of a batch of plans (index = the plan's position in the batch).

    ``iteration_ps`` and each of ``terms`` (keyed by :data:`TERMS`) are int64 arrays in ps; ``memory_bytes``
    (the peak per NPU) and ``memory_terms`` (by :data:`MEMORY_TERMS`) int64 arrays in bytes.
    """

    plans: tuple[dict[str, Any], ...]
    iteration_ps: np.ndarray
    terms: Mapping[str, np.ndarray]
    memory_bytes: np.ndarray
    memory_terms: Mapping[str, np.ndarray]

    def best(self, memory_limit: int | None = None) -> int:
        """The index of the fastest plan (of those holding at most ``memory_limit`` bytes per NPU, if given)."""
        times = self.iteration_ps.astype(float)
        if memory_limit is not None:
            times = np.where(self.memory_bytes <= memory_limit, times, np.inf)
        if not np.isfinite(times).any():
            raise FirstOrderError("no plan fits in the memory limit")
        return int(np.argmin(times))


def plan_keys(plan: Mapping[str, Any]) -> dict[str, Any]:
    """A plan's ``workload.parallelism`` keys without that prefix (as the ``parallelism`` generator yields them,
    or already bare)."""
    return {key.removeprefix(_PLAN): value for key, value in plan.items()}


class FirstOrderModel:
    """The first-order model of a base study's transformer: opens its compute backend (closed by :meth:`close`
    or on leaving a ``with`` block) and estimates batches of plans, each a set of ``workload.parallelism`` keys
    that override the study's."""

    def __init__(self, study: Study) -> None:
        study = with_shard_casts(study)
        config = study.workload.config
        if not isinstance(config, TransformerConfig):
            raise FirstOrderError(
                f"the first-order model needs a kind: transformer workload, not {study.workload.kind}"
            )
        if study.compute is None:
            raise FirstOrderError("the first-order model prices operators: the study needs a compute section")
        if study.compute.groups:
            raise FirstOrderError("compute.groups: the first-order model prices one device for every NPU")
        self._config = config
        self._base = config.model_dump(exclude_unset=True)
        fixed = "global_batch" in config.parallelism.model_fields_set
        self._batch = {} if fixed else {"global_batch": config.parallelism.batch}
        self._npus = study.npus
        self._stack = ExitStack()
        pricer = open_pricer(study.compute, self._stack)
        try:
            timer = GroupTimer(study.topology_proto(), study.system)
        except ValueError as exc:
            raise FirstOrderError(f"system: {exc}") from None
        self._pricer = PlanPricer(pricer, timer)

    def __enter__(self) -> FirstOrderModel:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the compute backend."""
        self._stack.close()

    def config(self, plan: Mapping[str, Any]) -> TransformerConfig:
        """The study's transformer with ``plan``'s keys; :class:`FirstOrderError` when it is no valid plan."""
        keys = plan_keys(plan)
        parallelism = {**self._base.get("parallelism", {}), **self._batch, **keys}
        try:
            config = TransformerConfig.model_validate({**self._base, "parallelism": parallelism})
        except ValidationError as exc:
            message = str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
            raise PlanDeclined(keys, message) from None
        shape = config.parallelism
        plan_npus = shape.tp * shape.cp * shape.pp * shape.dp
        if plan_npus != self._npus:
            raise PlanDeclined(keys, f"tp * cp * pp * dp = {plan_npus}, but the topology has {self._npus} NPUs")
        reason = unsupported(config)
        if reason is not None:
            raise PlanDeclined(keys, reason)
        return config

    def figures(self, plan: Mapping[str, Any]) -> PlanFigures:
        """The priced figures of one plan (:class:`~stratasim.optimize.first_order_plan.PlanFigures`)."""
        config = self.config(plan)
        try:
            figures = self._pricer.figures(config)
        except ValueError as exc:
            raise PlanDeclined(plan_keys(plan), str(exc)) from None
        if not transfers_hidden(figures):
            raise PlanDeclined(plan_keys(plan), TRANSFERS_EXPOSED)
        return figures

    def estimate(self, plans: Iterable[Mapping[str, Any]]) -> PlanEstimates:
        """The estimates of ``plans``, in order; :class:`PlanDeclined` for the first it cannot estimate."""
        listed = [dict(plan) for plan in plans]
        return _estimates(listed, [self.figures(plan) for plan in listed])

    def estimate_supported(self, plans: Iterable[Mapping[str, Any]]) -> tuple[PlanEstimates, dict[int, str]]:
        """The estimates of the ``plans`` the model can estimate, in order, and why it declines each other one (by
        its position in ``plans``)."""
        accepted: list[dict[str, Any]] = []
        figures: list[PlanFigures] = []
        declined: dict[int, str] = {}
        for index, plan in enumerate(plans):
            try:
                figures.append(self.figures(plan))
            except PlanDeclined as exc:
                declined[index] = exc.reason
                continue
            accepted.append(dict(plan))
        return _estimates(accepted, figures), declined


def _estimates(listed: list[dict[str, Any]], figures: Sequence[PlanFigures]) -> PlanEstimates:
    """The estimates of the plans ``listed``, from their ``figures``."""
    iteration, terms = compose(figures)
    memory = {
        "weights": np.array([f.memory.weights_bytes for f in figures], dtype=np.int64),
        "gradients": np.array([f.memory.gradients_bytes for f in figures], dtype=np.int64),
        "optimizer": np.array([f.memory.optimizer_bytes for f in figures], dtype=np.int64),
        "activations": np.array([f.memory.activations_bytes for f in figures], dtype=np.int64),
    }
    peak = sum(memory.values()) if figures else np.zeros(0, dtype=np.int64)
    return PlanEstimates(tuple(listed), iteration, terms, peak, memory)  # type: ignore[arg-type]


def estimate_plans(study: Study, plans: Iterable[Mapping[str, Any]]) -> PlanEstimates:
    """The first-order estimates of ``plans`` (``workload.parallelism`` overrides of ``study``), in order."""
    with FirstOrderModel(study) as model:
        return model.estimate(plans)


def _column(figures: Sequence[PlanFigures], read: Any) -> np.ndarray:
    return np.array([read(f) for f in figures], dtype=np.int64)


def compose(figures: Sequence[PlanFigures]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The iteration time of each plan and its :data:`TERMS`, from its figures (the module's formulas)."""
    if not figures:
        empty = np.zeros(0, dtype=np.int64)
        return empty, {term: empty for term in TERMS}
    m, v, pp, lc = (
        _column(figures, lambda f, k=k: getattr(f, k))
        for k in ("micro_batches", "virtual_stages", "pp", "chunk_layers")
    )
    layer_f = {
        k: _column(figures, lambda f, k=k: getattr(f.layer.forward, k))
        for k in ("compute", "recompute", "comm", "data_parallel")
    }
    layer_b = {  # with the weight pass under a split schedule
        k: _column(figures, lambda f, k=k: getattr(f.layer.backward, k) + getattr(f.layer.weight, k))
        for k in ("compute", "recompute", "comm", "data_parallel")
    }
    embedding = _column(figures, lambda f: _block_total(f.embedding))
    head = _column(figures, lambda f: _block_total(f.head))
    gather = _column(figures, lambda f: f.gather_ps)
    sends = _column(figures, lambda f: sum(f.send_ps[:-1]))
    wrap = _column(figures, lambda f: f.send_ps[-1] if f.send_ps else 0)
    mean_send = _column(figures, lambda f: sum(f.send_ps[:-1]) // max(1, len(f.send_ps) - 1))
    layer = sum(layer_f.values()) + sum(layer_b.values())
    layers = v * lc * layer
    first, last = np.arange(3) == 0, np.arange(3) == 2
    ends = first[None, :].astype(np.int64) + last[None, :]
    ones = np.ones((1, 3), dtype=np.int64)
    gathers = np.where(pp[:, None] > 1, 2 * v[:, None] - ends, 0) * gather[:, None]
    single = (pp == 1)[:, None]
    edges = embedding[:, None] * (first | single) + head[:, None] * (last | single)
    work = layers[:, None] * ones + edges + gathers  # one micro-batch through each stage kind
    present = np.stack([np.ones_like(pp, bool), pp > 2, pp > 1], axis=1)
    busiest = np.argmax(np.where(present, work, -1), axis=1)
    rows = np.arange(len(figures))
    peak = work[rows, busiest]
    chunk = (layers[:, None] * ones + gathers) // v[:, None] + edges  # a chunk's pass, the embedding's or head's whole
    total = chunk[:, 0] + np.where(pp > 1, chunk[:, 2] + (pp - 2).clip(0) * chunk[:, 1], 0)
    bubble = total - chunk[rows, busiest]
    p2p = 2 * (v * sends + (v - 1) * wrap)
    offsets = np.stack([np.zeros_like(pp), np.ones_like(pp), pp - 1], axis=1)
    offsets *= (lc * sum(layer_b.values()) + gather + mean_send)[:, None]
    pipeline = m * peak + bubble + p2p
    walked = [row for row, f in enumerate(figures) if f.schedule in SPLIT]
    if walked:  # the split schedules' pipeline walked pass by pass: its transfers go with the bubble
        ends = np.array([_walked_ends(figures[row]) for row in walked], dtype=np.int64)
        pipeline[walked] = ends[:, 0]
        offsets[walked] = ends[:, :1] - ends
        p2p[walked] = 0
        bubble[walked] = pipeline[walked] - m[walked] * peak[walked]
    tail, optimizer = _tail(figures, present, offsets)
    per_layer = m * v * lc
    terms = {
        "forward_compute": per_layer * layer_f["compute"],
        "backward_compute": per_layer * layer_b["compute"],
        "recompute": per_layer * (layer_f["recompute"] + layer_b["recompute"]),
        "tp_comm": per_layer * (layer_f["comm"] + layer_b["comm"]),
        "embedding_head": m * edges[rows, busiest],
        "pipeline_bubble": bubble,
        "pipeline_p2p": m * gathers[rows, busiest] + p2p,
        "dp_comm": tail - optimizer + per_layer * (layer_f["data_parallel"] + layer_b["data_parallel"]),
        "optimizer_step": optimizer,
    }
    return pipeline + tail, terms


def _block_total(times: BlockTimes) -> int:
    """A block's passes over one micro-batch: forward, backward and any weight pass."""
    return times.forward.total + times.backward.total + times.weight.total


def _walked_ends(f: PlanFigures) -> tuple[int, int, int]:
    """When the first, the latest middle and the last stage end a split schedule's pipeline
    (:func:`~stratasim.optimize.first_order_walk.stage_ends`), from one micro-batch's passes per chunk."""
    where = placement(f.schedule)
    chunks = 2 if where == "dual" else f.virtual_stages  # DualPipe: one chunk of each model copy per stage
    last = f.pp * (1 if where == "dual" else f.virtual_stages) - 1

    def passes(position: int, part: Any) -> tuple[int, int, int]:
        times = [
            f.chunk_layers * part(getattr(f.layer, kind))
            + (part(getattr(f.embedding, kind)) if position == 0 else 0)
            + (part(getattr(f.head, kind)) if position == last else 0)
            for kind in ("forward", "backward", "weight")
        ]
        return times[0], times[1], times[2]

    def table(part: Any) -> list[list[tuple[int, int, int]]]:
        return [[passes(p, part) for p in chunk_positions(where, s, f.pp, chunks)] for s in range(f.pp)]

    computes = table(lambda t: t.compute + t.recompute) if f.schedule in ("dualpipe", "dualpipev") else None
    sends = f.send_ps[:-1]
    ends = stage_ends(f.schedule, f.micro_batches, table(lambda t: t.total), sends, where, f.gather_ps, computes)
    middle = max(ends[1:-1], default=ends[0])
    return ends[0], middle, ends[-1]


def _tail(figures: Sequence[PlanFigures], present: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What follows the pipeline: the latest stage kind's gradient reduction and optimizer step, each starting
    ``offsets`` (by stage kind) before the first stage's end; and the first stage's optimizer step."""
    reduce = np.array([[r for r, _ in f.gradient_ps] for f in figures], dtype=np.int64)
    gather = np.array([[g for _, g in f.gradient_ps] for f in figures], dtype=np.int64)
    optimizer = np.array([f.optimizer_ps for f in figures], dtype=np.int64)
    tails = np.where(present, -offsets + reduce + np.maximum(gather, optimizer), np.iinfo(np.int64).min)
    return tails.max(axis=1), optimizer[:, 0]
