"""The per-plan figures the first-order model composes: one plan's pass times, pipeline transfers, gradient
reductions, optimizer steps and memory, each read from the builder's own accounting and priced once per distinct
value (:class:`PlanPricer` caches by what decides each).

Stages come in three kinds for an evenly split dense model: the first (the embedding), the last (the head) and
the middle ones (identical to one another); with one stage, first and last are one. Every figure below is given
per kind, as arrays indexed ``[first, middle, last]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stratasim.kernel import operators
from stratasim.optimize.first_order_groups import GroupTimer
from stratasim.optimize.first_order_passes import BlockTimes, ContextParallel, ZeroThree, block_times, with_zero3
from stratasim.system_layer.operators import OperatorPricer
from stratasim.workload_layer.transformer.blocks import (
    embedding_parameters,
    embedding_steps,
    head_parameters,
    head_steps,
    layer_parameters,
    layer_steps,
)
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.memory import StageMemory, stage_memory
from stratasim.workload_layer.transformer.optimizer import optimizer_step
from stratasim.workload_layer.transformer.pipeline_schedule import placement
from stratasim.workload_layer.transformer.rank_layout import hsdp_groups
from stratasim.workload_layer.transformer.shard_casts import casts_apply, gradient_accumulate, parameter_cast

__all__ = ["SPLIT", "PlanFigures", "PlanPricer", "stage_parameters", "unsupported"]

SPLIT = ("zb_h1", "zb_h2", "zb_v", "dualpipev")
"""The split schedules the model walks pass by pass (:mod:`stratasim.optimize.first_order_walk`)."""


@dataclass(frozen=True)
class PlanFigures:
    """What the closed form of one plan needs, in ps and bytes (``[first, middle, last]`` stage kinds)."""

    pp: int
    virtual_stages: int
    micro_batches: int
    schedule: str
    chunk_layers: int
    layer: BlockTimes
    embedding: BlockTimes
    head: BlockTimes
    gather_ps: int
    """The TP all-gather of a received boundary tensor (scatter/gather), per receiving pass."""
    send_ps: tuple[int, ...]
    """The transfer from each stage to the next (``pp - 1`` of them, then the last stage's to the first)."""
    gradient_ps: tuple[tuple[int, int], ...]
    """Per stage kind: the DP all-reduce (ZeRO 0) or reduce-scatter, and the all-gather (ZeRO 1 and 2; else 0)."""
    optimizer_ps: tuple[int, int, int]
    memory: StageMemory
    """The peak stage's memory (the builder's ``stage_memory``, largest total over the stages)."""


def unsupported(config: TransformerConfig) -> str | None:
    """Why the first-order model cannot estimate ``config``'s plan, or None."""
    plan, model = config.parallelism, config.model
    if model.experts:
        return "mixtures of experts (model.experts) are not modelled"
    if plan.schedule == "dualpipev" and (plan.tp > 1 or plan.cp > 1):
        return (
            "the dualpipev schedule with TP or CP: its overlapped forward-backward pairs hide one pass's "
            "communication under the other's compute, which is not modelled"
        )
    if plan.schedule == "dualpipe":
        return "the dualpipe schedule (two model copies, overlapped forward-backward pairs) is not modelled"
    if plan.cp > 1 and plan.cp_comm_type == "a2a+p2p":
        return "hierarchical context parallelism (cp_comm_type: a2a+p2p) is not modelled"
    if plan.schedule in SPLIT and plan.recompute == "full":
        return f"full recomputation under the {plan.schedule} schedule (what its weight passes hold) is not modelled"
    if plan.schedule_times == "flops":
        return "schedule_times: flops (greedy orders weighed by the passes' FLOPs) is not modelled"
    if plan.cp > 1 and plan.cp_comm_type == "all_gather":
        return "context parallelism with cp_comm_type: all_gather (keys and values gathered) is not modelled"
    if plan.schedule in SPLIT and plan.zero == 3:
        return (
            f"ZeRO-3 under the {plan.schedule} schedule (gradients scattered after the weight passes) is not modelled"
        )
    if plan.dp_bucket is not None:
        return "gradient buckets (parallelism.dp_bucket) are not modelled: the model reduces one bucket"
    if plan.stage_layers != "even" or plan.batch_split != "even":
        return "uneven stage_layers or batch_split are not modelled"
    if config.model.layers % (plan.pp * plan.virtual_stages):
        return "layers not divisible by pp * virtual_stages"
    return None


def stage_parameters(config: TransformerConfig, stage: int) -> int:
    """Parameters one TP rank of ``stage`` holds, as the builder counts its blocks' (an evenly split dense model):
    its layers', the embedding's on the first stage and the head's on the last (on the first too in ZB-V's V)."""
    model, plan = config.model, config.parallelism
    count = model.layers // plan.pp * layer_parameters(model, 0, plan.tp, plan.ep).dense
    if stage == 0:
        count += embedding_parameters(model, plan.tp)
    if stage == (0 if placement(plan.schedule) == "v" else plan.pp - 1):
        count += head_parameters(model, plan.tp, plan.pp)
    return count


class PlanPricer:
    """Prices plans of one study: operators through ``pricer``, collectives and transfers through ``timer``;
    caches each layer's, embedding's and head's passes by what decides them."""

    def __init__(self, pricer: OperatorPricer, timer: GroupTimer) -> None:
        self._pricer, self._timer = pricer, timer
        self._blocks: dict[tuple[Any, ...], tuple[BlockTimes, BlockTimes, BlockTimes, int]] = {}
        self._optimizer: dict[tuple[int, str], int] = {}
        self._sends_by: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
        self._groups: dict[tuple[Any, ...], tuple[int, ...]] = {}

    def figures(self, config: TransformerConfig) -> PlanFigures:
        """Every figure of ``config``'s plan (checked by :func:`unsupported` first)."""
        plan = config.parallelism
        layer, embedding, head, gather = self._passes(config)
        if plan.zero == 3:
            model = config.model
            layer = with_zero3(layer, self._zero3(config, layer_parameters(model, 0, plan.tp, plan.ep).dense))
            embedding = with_zero3(embedding, self._zero3(config, embedding_parameters(model, plan.tp)))
            head = with_zero3(head, self._zero3(config, head_parameters(model, plan.tp, plan.pp)))
        micro_batches = plan.batch // (plan.micro_batch * plan.dp)
        kinds = (0, min(1, plan.pp - 1), plan.pp - 1)
        parameters = [stage_parameters(config, stage) for stage in kinds]
        # The middle stages never hold the most: the first holds as many layers, at least as many micro-batches'
        # activations in flight, and the embedding besides.
        memories = [
            stage_memory(config, stage, parameters[i], micro_batches) for i, stage in ((0, 0), (2, plan.pp - 1))
        ]
        shards = [count if plan.zero == 0 else -(-count // plan.shard_ranks) for count in parameters]  # memory._held
        return PlanFigures(
            pp=plan.pp,
            virtual_stages=plan.virtual_stages,
            micro_batches=micro_batches,
            schedule=plan.schedule,
            chunk_layers=config.model.layers // (plan.pp * plan.virtual_stages),
            layer=layer,
            embedding=embedding,
            head=head,
            gather_ps=gather,
            send_ps=self._sends(config),
            gradient_ps=tuple(self._gradients(config, stage, count) for stage, count in zip(kinds, parameters)),
            optimizer_ps=tuple(self._optimizer_ps(config, count) for count in shards),  # type: ignore[arg-type]
            memory=max(memories, key=lambda memory: memory.total_bytes),
        )

    def _passes(self, config: TransformerConfig) -> tuple[BlockTimes, BlockTimes, BlockTimes, int]:
        """The layer's, embedding's and head's passes and a boundary gather, priced once per distinct key."""
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
        )
        known = self._blocks.get(key)
        if known is None:
            dtype = operators.parse_dtype(config.precision)
            gemm = None if config.gemm_precision is None else operators.parse_dtype(config.gemm_precision)
            gemm = None if gemm == dtype else gemm
            tensor = plan.micro_batch * config.local_seq_len * model.hidden * operators.dtype_bytes(dtype)
            group = self._group(config, "tp")
            context = self._context(config)

            def tp(collective: str, size: int) -> int:
                return self._timer.collective_ps(collective, size, group)

            def times(steps: Any, recompute: bool) -> BlockTimes:
                split = plan.schedule in SPLIT
                return block_times(steps, recompute, self._pricer, dtype, gemm, tensor, tp, context, split)

            gathers = plan.scatter_gather and not plan.sequence_parallel
            known = (
                times(layer_steps(config, 0), plan.recompute == "full"),
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

        return ContextParallel(transfer, lambda size: timer.collective_ps("all_to_all", size, group))

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

    def _zero3(self, config: TransformerConfig, parameters: int) -> ZeroThree:
        """ZeRO-3's gather, scatter and casts around a block of ``parameters`` parameters (per TP rank), and with
        HSDP the replicas' all-reduce the next gather queues behind (:class:`ZeroThree`)."""
        plan = config.parallelism
        dtype = operators.parse_dtype(config.precision)
        size = parameters * operators.dtype_bytes(dtype)
        group = self._group(config, "shard")
        gather = self._timer.collective_ps("all_gather", size, group)
        scatter = self._timer.collective_ps("reduce_scatter", size, group)
        replica = self._replica_ps(config, parameters) if self._replica_queues(config) else 0
        if not (plan.shard_casts and casts_apply(dtype)) or len(group) < 2:
            return ZeroThree(gather, scatter, replica=replica)
        shard = -(-parameters // len(group))
        cast, accumulate = self._pricer.durations_ps([parameter_cast(shard, dtype), gradient_accumulate(shard, dtype)])
        return ZeroThree(gather, scatter, cast, accumulate, replica)

    def _replica_queues(self, config: TransformerConfig) -> bool:
        """Whether HSDP's replica group shares a network dimension with its shard group."""
        if config.parallelism.hsdp < 2:
            return False
        spans = (self._timer.spans(self._group(config, axis)) for axis in ("shard", "replica"))
        shard, replica = ({d for d, _ in each} for each in spans)
        return bool(shard & replica)

    def _gradients(self, config: TransformerConfig, stage: int, parameters: int) -> tuple[int, int]:
        """The gradient reduction after ``stage``'s last backward pass over its DP x CP group: (all-reduce, 0) of
        its one bucket, or with ZeRO 1 and 2 (reduce-scatter, all-gather). ZeRO 3's passes reduce-scatter each
        block's gradients: nothing is left, but with HSDP the all-reduce across the replicas of the shard of the
        stage's last block in backward order (the embedding on the first stage, else a layer); the earlier blocks'
        are taken as done behind the passes that follow them."""
        plan, model = config.parallelism, config.model
        if plan.zero == 3:
            dense = layer_parameters(model, 0, plan.tp, plan.ep).dense
            last = embedding_parameters(model, plan.tp) if stage == 0 else dense
            return self._replica_ps(config, last, stage), 0
        size = parameters * operators.dtype_bytes(operators.parse_dtype(config.precision))
        group = self._group(config, "data", stage)
        if plan.zero == 0:
            return self._timer.collective_ps("all_reduce", size, group), 0
        scatter = self._timer.collective_ps("reduce_scatter", size, group)
        return scatter, self._timer.collective_ps("all_gather", size, group)

    def _replica_ps(self, config: TransformerConfig, parameters: int, stage: int = 0) -> int:
        """HSDP: the all-reduce across ``stage``'s replicas of the gradient shard of a block of ``parameters``
        parameters, after its reduce-scatter; 0 without HSDP."""
        if config.parallelism.hsdp < 2:
            return 0
        shard = -(-parameters // len(self._group(config, "shard", stage)))
        size = shard * operators.dtype_bytes(operators.parse_dtype(config.precision))
        return self._timer.collective_ps("all_reduce", size, self._group(config, "replica", stage))

    def _optimizer_ps(self, config: TransformerConfig, parameters: int) -> int:
        """The optimizer step over the ``parameters`` whose states the stage holds (its ZeRO shard)."""
        key = (parameters, config.precision)
        if key not in self._optimizer:
            op = optimizer_step(parameters, operators.parse_dtype(config.precision))
            self._optimizer[key] = self._pricer.durations_ps([op])[0] if parameters else 0
        return self._optimizer[key]

    def _group(self, config: TransformerConfig, axis: str, stage: int = 0) -> tuple[int, ...]:
        """The ``axis`` group of ``stage``'s first NPU (TP, CP and DP rank 0), laid out once per plan shape: one
        axis's (``tp``, ``cp``, ``pp``), ``data`` (the DP x CP group gradients are reduced over), or HSDP's
        ``shard`` (``data`` without HSDP) and ``replica`` groups."""
        plan = config.parallelism
        key = (plan.order, plan.tp, plan.cp, plan.pp, plan.dp, plan.hsdp, axis, stage)
        known = self._groups.get(key)
        if known is None:
            layout = plan.layout
            npu = layout.npu({"pp": stage})
            shard, replica = hsdp_groups(layout, npu, plan.hsdp)
            if axis == "shard" and shard is not None:
                known = shard
            elif axis in ("data", "shard"):
                known = layout.joint_group(npu, ("cp", "dp"))
            else:
                known = replica if axis == "replica" else layout.group(npu, axis)
            self._groups[key] = known
        return known
