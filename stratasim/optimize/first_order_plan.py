"""The per-plan figures the first-order model composes: one plan's pass times, pipeline transfers, gradient
reductions, optimizer steps and memory, each read from the builder's own accounting and priced once per distinct
value (:class:`PlanPricer` caches by what decides each).

Stages come in three kinds for an evenly split model: the first (the embedding), the last (the head) and the
middle ones (identical to one another); with one stage, first and last are one. Every figure below is given per
kind, as arrays indexed ``[first, middle, last]``.

The repeating unit of a chunk is a *period* of layers: one layer for a dense model, ``moe_every`` for a mixture of
experts (an MoE layer then ``moe_every - 1`` dense ones, Megatron-core's ``moe_layer_freq``); every chunk starts a
period when its layers are a whole number of them, so its passes are so many periods' passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stratasim.kernel import operators
from stratasim.optimize.first_order_groups import GroupTimer
from stratasim.optimize.first_order_passes import (
    BlockTimes,
    Communication,
    ContextParallel,
    ZeroThree,
    block_times,
    with_zero3,
)
from stratasim.optimize.first_order_reductions import GradientReductions
from stratasim.system_layer.operators import OperatorPricer
from stratasim.workload_layer.transformer.blocks import (
    Parameters,
    embedding_parameters,
    embedding_steps,
    head_parameters,
    head_steps,
    layer_parameters,
    layer_steps,
)
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.memory import StageMemory, stage_memory
from stratasim.workload_layer.transformer.moe import expert_groups
from stratasim.workload_layer.transformer.optimizer import optimizer_step
from stratasim.workload_layer.transformer.pipeline_schedule import chunk_positions, placement
from stratasim.workload_layer.transformer.rank_layout import hsdp_groups
from stratasim.workload_layer.transformer.shard_casts import casts_apply, gradient_accumulate, parameter_cast

__all__ = [
    "SPLIT",
    "TRANSFERS_EXPOSED",
    "PlanFigures",
    "PlanPricer",
    "replica_micro_batches",
    "stage_parameters",
    "transfers_hidden",
    "unsupported",
]

SPLIT = ("zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipev")
"""The split schedules the model walks pass by pass (:mod:`stratasim.optimize.first_order_walk`)."""


@dataclass(frozen=True)
class PlanFigures:
    """What the closed form of one plan needs, in ps and bytes (``[first, middle, last]`` stage kinds)."""

    pp: int
    virtual_stages: int
    micro_batches: int
    schedule: str
    chunk_layers: int
    """The periods of layers in a model chunk (layers, for a dense model)."""
    layer: BlockTimes
    """One period of layers' passes."""
    embedding: BlockTimes
    head: BlockTimes
    gather_ps: int
    """The TP all-gather of a received boundary tensor (scatter/gather), per receiving pass."""
    send_ps: tuple[int, ...]
    """The transfer from each stage to the next (``pp - 1`` of them, then the last stage's to the first)."""
    gradient_ps: tuple[tuple[int, int], ...]
    """Per stage kind: the DP all-reduce (ZeRO 0) or reduce-scatter, and the all-gather (ZeRO 1 and 2; else 0);
    with experts, when the last reduction the optimizer step waits for ends, and the last gather after it."""
    optimizer_ps: tuple[int, int, int]
    memory: StageMemory
    """The peak stage's memory (the builder's ``stage_memory``, largest total over the stages)."""


def unsupported(config: TransformerConfig) -> str | None:
    """Why the first-order model cannot estimate ``config``'s plan, or None."""
    plan, model = config.parallelism, config.model
    if model.experts and model.routing is not None:
        return "skewed expert routing (model.routing) is not modelled: the model routes evenly"
    if model.experts and plan.zero == 3 and (plan.hsdp > 1 or plan.shard_casts):
        return "ZeRO-3 with mixtures of experts (model.experts) and HSDP or shard casts is not modelled"
    if model.experts and plan.cp > 1:
        return "context parallelism with mixtures of experts (model.experts) is not modelled"
    if plan.schedule == "dualpipe" and model.experts:
        return "the dualpipe schedule with mixtures of experts (model.experts) is not modelled"
    if plan.schedule in ("dualpipe", "dualpipev") and (plan.tp > 1 or plan.cp > 1):
        return (
            f"the {plan.schedule} schedule with TP or CP is not modelled: the engine hides each overlapped pair's "
            "communication under the other pass's compute operator by operator, which no pass-level rule matched "
            "within 5 % on held-out plans"
        )
    if plan.cp > 1 and plan.cp_comm_type == "a2a+p2p":
        return "hierarchical context parallelism (cp_comm_type: a2a+p2p) is not modelled"
    if plan.schedule in SPLIT and plan.recompute == "full":
        return f"full recomputation under the {plan.schedule} schedule (what its weight passes hold) is not modelled"
    if plan.schedule_times == "flops":
        return "schedule_times: flops (greedy orders weighed by the passes' FLOPs) is not modelled"
    if plan.schedule in SPLIT and plan.zero == 3:
        return (
            f"ZeRO-3 under the {plan.schedule} schedule (gradients scattered after the weight passes) is not modelled"
        )
    if plan.dp_bucket is not None and plan.zero < 3 and (plan.virtual_stages > 1 or plan.schedule in SPLIT):
        return "gradient buckets (parallelism.dp_bucket) under the interleaved or a split schedule are not modelled"
    if plan.dp_bucket is not None and plan.zero < 3 and model.experts:
        return "gradient buckets (parallelism.dp_bucket) with mixtures of experts are not modelled"
    if plan.stage_layers != "even":
        return "uneven stage_layers are not modelled"
    if plan.batch_split == "by_device":
        return "batch_split: by_device is not modelled (the counts come from the devices' throughput)"
    if config.model.layers % (plan.pp * plan.virtual_stages * period(config)):
        return "layers not divisible by pp * virtual_stages" + (
            " * moe_every (every model chunk a whole number of MoE periods)" if model.experts else ""
        )
    return None


TRANSFERS_EXPOSED = (
    "the interleaved schedule with a pipeline transfer longer than a model chunk's forward or backward pass is not "
    "modelled: the steady state no longer hides the transfers, as the closed form assumes"
)
"""Why :func:`transfers_hidden` declines a plan (the same words for every plan)."""


def transfers_hidden(figures: PlanFigures) -> bool:
    """Whether the interleaved closed form's steady state holds for ``figures``' plan (always, for another schedule).

    In the interleaved schedule's steady state each stage runs a forward and a backward chunk pass in turn, and the
    next stage (across the wrap, the first) takes a chunk's output one pass later: each transfer must fit under one
    chunk pass, ``max(send) <= min(F, B)`` of a chunk's layers (with their TP gathers), or the receiving stage waits
    at every step and the busiest stage is no longer busy from the fill to the drain. Walking equal pipelines pass by
    pass (:func:`~stratasim.optimize.first_order_walk.stage_ends`) finds the bubble formula exact up to exactly that
    bound, whatever the head, ``pp``, ``v`` and ``m``, and longer beyond it."""
    if figures.schedule != "interleaved" or figures.pp < 2:
        return True
    layer = figures.layer
    forward = figures.chunk_layers * layer.forward.total + figures.gather_ps
    backward = figures.chunk_layers * (layer.backward.total + layer.weight.total) + figures.gather_ps
    return max(figures.send_ps) <= min(forward, backward)


def replica_micro_batches(config: TransformerConfig) -> int:
    """The micro-batches of the busiest DP replica's pipeline: with an uneven ``batch_split`` the others reach each
    gradient reduction early and wait for it there, so it sets the iteration and the activations held."""
    plan = config.parallelism
    split = plan.batch_split
    return max(split) if isinstance(split, tuple) else plan.batch // (plan.micro_batch * plan.dp)


def period(config: TransformerConfig) -> int:
    """The layers of one repeating period: ``moe_every`` for a mixture of experts, else 1."""
    return config.model.moe_every if config.model.experts else 1


def stage_parameters(config: TransformerConfig, stage: int) -> Parameters:
    """Parameters one TP rank of ``stage`` holds, dense and expert, as the builder counts its blocks' (an evenly
    split model): its layers', the embedding's on the first stage and the head's on the last (on the first too in
    ZB-V's V)."""
    model, plan = config.model, config.parallelism
    where = placement(plan.schedule)
    positions = chunk_positions(where, stage, plan.pp, plan.chunks_per_stage)
    chunks = plan.pp * (1 if where == "dual" else plan.chunks_per_stage)  # the model's (one copy's, under dual)
    periods = model.layers // chunks * len(positions) // period(config)
    layers = sum((layer_parameters(model, i, plan.tp, plan.ep) for i in range(period(config))), Parameters())
    count = Parameters(periods * layers.dense, periods * layers.expert)
    if 0 in positions:
        count += Parameters(embedding_parameters(model, plan.tp))
    if chunks - 1 in positions:
        count += Parameters(head_parameters(model, plan.tp, plan.pp))
    return count


class PlanPricer:
    """Prices plans of one study: operators through ``pricer``, collectives and transfers through ``timer``;
    caches each layer's, embedding's and head's passes by what decides them."""

    def __init__(self, pricer: OperatorPricer, timer: GroupTimer) -> None:
        self._pricer, self._timer = pricer, timer
        self._blocks: dict[tuple[Any, ...], tuple[tuple[BlockTimes, ...], BlockTimes, BlockTimes, int]] = {}
        self._optimizer: dict[tuple[int, str], int] = {}
        self._sends_by: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
        self._groups: dict[tuple[Any, ...], tuple[int, ...]] = {}
        self._reductions = GradientReductions(timer, self._group)

    def figures(self, config: TransformerConfig) -> PlanFigures:
        """Every figure of ``config``'s plan (checked by :func:`unsupported` first)."""
        plan = config.parallelism
        layers, embedding, head, gather = self._passes(config)
        if plan.zero == 3:
            model = config.model
            layers = tuple(
                with_zero3(times, self._zero3(config, layer_parameters(model, i, plan.tp, plan.ep)))
                for i, times in enumerate(layers)
            )
            embedding = with_zero3(embedding, self._zero3(config, Parameters(embedding_parameters(model, plan.tp))))
            head = with_zero3(head, self._zero3(config, Parameters(head_parameters(model, plan.tp, plan.pp))))
        layer = sum(layers[1:], layers[0])
        micro_batches = replica_micro_batches(config)
        kinds = (0, min(1, plan.pp - 1), plan.pp - 1)
        parameters = [stage_parameters(config, stage) for stage in kinds]
        # The middle stages never hold the most: the first holds as many layers, at least as many micro-batches'
        # activations in flight, and the embedding besides.
        # Under DualPipe the middle stages hold two chunks' activations in flight: every kind is asked.
        asked = enumerate(kinds) if plan.schedule == "dualpipe" else ((0, 0), (2, plan.pp - 1))
        memories = [
            stage_memory(config, stage, parameters[i].dense, micro_batches, parameters[i].expert) for i, stage in asked
        ]
        shards = [self._shard(config, count) for count in parameters]
        return PlanFigures(
            pp=plan.pp,
            virtual_stages=plan.virtual_stages,
            micro_batches=micro_batches,
            schedule=plan.schedule,
            chunk_layers=config.model.layers // (plan.pp * plan.virtual_stages * period(config)),
            layer=layer,
            embedding=embedding,
            head=head,
            gather_ps=gather,
            send_ps=self._sends(config),
            gradient_ps=tuple(
                self._reductions.bucketed(config, stage, (layer, embedding, head))
                if plan.dp_bucket is not None and plan.zero < 3
                else self._reductions.gradients(config, stage, count)
                for stage, count in zip(kinds, parameters)
            ),
            optimizer_ps=tuple(self._optimizer_ps(config, count) for count in shards),  # type: ignore[arg-type]
            memory=max(memories, key=lambda memory: memory.total_bytes),
        )

    def _passes(self, config: TransformerConfig) -> tuple[tuple[BlockTimes, ...], BlockTimes, BlockTimes, int]:
        """The passes of a period's layers, the embedding's and the head's, and a boundary gather, priced once per
        distinct key."""
        plan, model = config.parallelism, config.model
        key = (
            plan.tp,
            plan.cp,
            plan.cp_comm_type,
            plan.micro_batch,
            plan.sequence_parallel,
            plan.recompute,
            plan.order,
            plan.scatter_gather,
            plan.schedule in SPLIT,
            plan.ep,
            *(self._group(config, axis) for axis in ("tp", "cp", "ep")),  # where they sit: the layout's shape
        )
        known = self._blocks.get(key)
        if known is None:
            dtype = operators.parse_dtype(config.precision)
            gemm = None if config.gemm_precision is None else operators.parse_dtype(config.gemm_precision)
            gemm = None if gemm == dtype else gemm
            tensor = plan.micro_batch * config.local_seq_len * model.hidden * operators.dtype_bytes(dtype)
            group = self._group(config, "tp")

            def tp(collective: str, size: int) -> int:
                return self._timer.collective_ps(collective, size, group)

            comm = Communication(tp, self._context(config), self._experts(config))

            def times(steps: Any, recompute: bool) -> BlockTimes:
                split = plan.schedule in SPLIT
                return block_times(steps, recompute, self._pricer, dtype, gemm, tensor, comm, split)

            gathers = plan.scatter_gather and not plan.sequence_parallel
            layers = [times(layer_steps(config, i), plan.recompute == "full") for i in range(period(config))]
            known = (
                tuple(layers),
                times(embedding_steps(config), False),
                times(head_steps(config), False),
                tp("all_gather", tensor) if gathers else 0,
            )
            self._blocks[key] = known
        return known

    def _context(self, config: TransformerConfig) -> ContextParallel | None:
        """The CP group's ring transfers (into each member from the one before it) and all-to-alls."""
        if config.parallelism.cp < 2:
            return None
        group, timer = self._group(config, "cp"), self._timer

        def transfer(size: int) -> tuple[int, ...]:
            return tuple(timer.send_ps(size, group[r - 1], group[r]) for r in range(len(group)))

        return ContextParallel(transfer, lambda kind, size: timer.collective_ps(kind, size, group))

    def _experts(self, config: TransformerConfig) -> Callable[[int], int] | None:
        """An all-to-all of so many bytes over the EP group (None without experts or EP)."""
        if not config.model.experts or config.parallelism.ep < 2:
            return None
        group, timer = self._group(config, "ep"), self._timer
        return lambda size: timer.collective_ps("all_to_all", size, group)

    def _sends(self, config: TransformerConfig) -> tuple[int, ...]:
        """Each stage's transfer to the next, as :class:`~stratasim.workload_layer.transformer.workload.TransformerWorkload`
        sizes it (a ``1 / tp`` share with sequence parallelism or scatter/gather)."""
        plan, model = config.parallelism, config.model
        activation = (
            plan.micro_batch
            * config.local_seq_len
            * model.hidden
            * operators.dtype_bytes(operators.parse_dtype(config.precision))
        )
        size = activation // plan.tp if plan.sequence_parallel or plan.scatter_gather else activation
        pipeline = self._group(config, "pp")
        key = (size, pipeline)
        if key not in self._sends_by:
            self._sends_by[key] = tuple(
                self._timer.send_ps(size, pipeline[s], pipeline[(s + 1) % len(pipeline)])
                for s in range(len(pipeline) if len(pipeline) > 1 else 0)
            )
        return self._sends_by[key]

    def _zero3(self, config: TransformerConfig, parameters: Parameters) -> ZeroThree:
        """ZeRO-3's gather, scatter and casts around a block of ``parameters`` (per TP rank), and with HSDP the
        replicas' all-reduce the next gather queues behind (:class:`ZeroThree`). An MoE layer's expert parameters
        are gathered and scattered over the expert-data-parallel group after the dense ones: one after the other
        where the two groups share a network dimension, else side by side."""
        plan = config.parallelism
        dtype = operators.parse_dtype(config.precision)
        group = self._group(config, "shard")
        gather, scatter = self._shard_collectives(parameters.dense * operators.dtype_bytes(dtype), group)
        if parameters.expert:
            experts = self._group(config, "expert_data")
            more = self._shard_collectives(parameters.expert * operators.dtype_bytes(dtype), experts)
            spans = [{d for d, _ in self._timer.spans(each)} for each in (group, experts)]
            queued = bool(spans[0] & spans[1])
            gather, scatter = ((a + b) if queued else max(a, b) for a, b in zip((gather, scatter), more))
        replica = self._reductions.replica_ps(config, parameters.dense) if self._replica_queues(config) else 0
        if not (plan.shard_casts and casts_apply(dtype)) or len(group) < 2:
            return ZeroThree(gather, scatter, replica=replica)
        shard = -(-parameters.dense // len(group))
        cast, accumulate = self._pricer.durations_ps([parameter_cast(shard, dtype), gradient_accumulate(shard, dtype)])
        return ZeroThree(gather, scatter, cast, accumulate, replica)

    def _shard_collectives(self, size: int, group: tuple[int, ...]) -> tuple[int, int]:
        """ZeRO-3's all-gather and reduce-scatter of ``size`` bytes over ``group``."""
        return (
            self._timer.collective_ps("all_gather", size, group),
            self._timer.collective_ps("reduce_scatter", size, group),
        )

    def _replica_queues(self, config: TransformerConfig) -> bool:
        """Whether HSDP's replica group shares a network dimension with its shard group."""
        if config.parallelism.hsdp < 2:
            return False
        spans = (self._timer.spans(self._group(config, axis)) for axis in ("shard", "replica"))
        shard, replica = ({d for d, _ in each} for each in spans)
        return bool(shard & replica)

    def _shard(self, config: TransformerConfig, parameters: Parameters) -> int:
        """The parameters whose optimizer states a rank holds (``memory._held``): all of them, or from ZeRO 1 its
        share of the dense ones over the DP group and of the expert ones over the expert-data-parallel group."""
        plan = config.parallelism
        if plan.zero == 0:
            return parameters.total
        return -(-parameters.dense // plan.shard_ranks) + -(-parameters.expert // (plan.dp // plan.ep))

    def _optimizer_ps(self, config: TransformerConfig, parameters: int) -> int:
        """The optimizer step over the ``parameters`` whose states the stage holds (its ZeRO shard)."""
        key = (parameters, config.precision)
        if key not in self._optimizer:
            op = optimizer_step(parameters, operators.parse_dtype(config.precision))
            self._optimizer[key] = self._pricer.durations_ps([op])[0] if parameters else 0
        return self._optimizer[key]

    def _group(self, config: TransformerConfig, axis: str, stage: int = 0) -> tuple[int, ...]:
        """The ``axis`` group of ``stage``'s first NPU (TP, CP and DP rank 0), laid out once per plan shape: one
        axis's (``tp``, ``cp``, ``pp``), ``data`` (the DP x CP group gradients are reduced over), HSDP's ``shard``
        (``data`` without HSDP) and ``replica`` groups, or a mixture of experts' ``ep`` and ``expert_data`` groups
        (:func:`~stratasim.workload_layer.transformer.moe.expert_groups`)."""
        plan = config.parallelism
        key = (plan.order, plan.tp, plan.cp, plan.pp, plan.dp, plan.hsdp, plan.ep, axis, stage)
        known = self._groups.get(key)
        if known is None:
            layout = plan.layout
            npu = layout.npu({"pp": stage})
            shard, replica = hsdp_groups(layout, npu, plan.hsdp)
            if axis in ("ep", "expert_data"):
                replicas = layout.group(npu, "dp")
                ranks = expert_groups(0, plan.dp, plan.ep)[axis == "expert_data"]
                known = tuple(replicas[d] for d in ranks)
            elif axis == "shard" and shard is not None:
                known = shard
            elif axis in ("data", "shard"):
                known = layout.joint_group(npu, ("cp", "dp"))
            else:
                known = replica if axis == "replica" else layout.group(npu, axis)
            self._groups[key] = known
        return known
