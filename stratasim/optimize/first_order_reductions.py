"""What a training plan's stages reduce after their passes, in closed form: the DP gradient reduction of each stage
kind as the emitter issues it (one bucket, or ``dp_bucket``-sized buckets during the last backward pass), the
expert bucket beside the dense one, DualPipe's mirror all-reduce, and HSDP's replica all-reduce; collectives that
share an NPU's network dimensions queued as it runs them (:mod:`stratasim.optimize.first_order_queues`).

Each figure is a pair ``(R, G)``: when the last reduction the optimizer step waits for ends, after the stage's last
pass, and how long the last all-gather (ZeRO 1 and 2) runs on after that.
"""

from __future__ import annotations

from collections.abc import Callable

from stratasim.kernel import operators
from stratasim.optimize.first_order_groups import GroupTimer
from stratasim.optimize.first_order_passes import BlockTimes
from stratasim.optimize.first_order_queues import Queued, queued_ends
from stratasim.workload_layer.transformer.blocks import (
    Parameters,
    embedding_parameters,
    head_parameters,
    layer_parameters,
)
from stratasim.workload_layer.transformer.config import TransformerConfig

__all__ = ["GroupOf", "GradientReductions"]

GroupOf = Callable[[TransformerConfig, str, int], tuple[int, ...]]
"""The NPUs of a plan's ``axis`` group of a stage's first NPU (:meth:`~stratasim.optimize.first_order_plan.PlanPricer`'s
``_group``)."""


class GradientReductions:
    """The gradient reductions of plans on one topology: collectives through ``timer``, groups from ``group``."""

    def __init__(self, timer: GroupTimer, group: GroupOf) -> None:
        self._timer, self._group = timer, group

    def gradients(self, config: TransformerConfig, stage: int, parameters: Parameters) -> tuple[int, int]:
        """The gradient reduction after ``stage``'s last backward pass over its DP x CP group: (all-reduce, 0) of
        its one bucket, or with ZeRO 1 and 2 (reduce-scatter, all-gather). ZeRO 3's passes reduce-scatter each
        block's gradients: nothing is left, but with HSDP the all-reduce across the replicas of the shard of the
        stage's last block in backward order (the embedding on the first stage, else a layer); the earlier blocks'
        are taken as done behind the passes that follow them. With experts, :meth:`_with_experts`."""
        plan, model = config.parallelism, config.model
        if plan.zero == 3:
            dense = layer_parameters(model, 0, plan.tp, plan.ep).dense
            last = embedding_parameters(model, plan.tp) if stage == 0 else dense
            return self.replica_ps(config, last, stage), 0
        if parameters.expert:
            return self._with_experts(config, stage, parameters)
        size = parameters.dense * operators.dtype_bytes(operators.parse_dtype(config.precision))
        group = self._group(config, "data", stage)
        if plan.schedule == "dualpipe":
            return self._with_mirror(config, stage, size)
        if plan.zero == 0:
            return self._timer.collective_ps("all_reduce", size, group), 0
        scatter = self._timer.collective_ps("reduce_scatter", size, group)
        return scatter, self._timer.collective_ps("all_gather", size, group)

    def bucketed(self, config: TransformerConfig, stage: int, blocks: tuple[BlockTimes, ...]) -> tuple[int, int]:
        """The gradient buckets of ``stage`` (one model chunk: its last pass is its last backward pass) as
        PyTorch DDP and the emitter reduce them: a block's gradients join the open bucket when its backward pass
        ends (the head first, then the layers, the embedding last), each bucket full at ``dp_bucket`` bytes is
        reduced at once and the rest after the pass, over the DP group, each collective after the one before
        (with ZeRO 1 and 2 a bucket's all-gather when its reduce-scatter ends): when the last reduction ends after
        the pass, and how long the last all-gather runs on. ``blocks`` are the (layer, embedding, head) passes.

        Exact when the DP group shares no network dimension with the TP and CP groups, whose collectives in the
        passes would otherwise queue behind the buckets' (:class:`ValueError` then: the plan is declined)."""
        plan, model = config.parallelism, config.model
        group = self._group(config, "data", stage)
        dims = {d for d, _ in self._timer.spans(group)}
        if any(dims & {d for d, _ in self._timer.spans(self._group(config, axis, 0))} for axis in ("tp", "cp")):
            raise ValueError(
                "gradient buckets (parallelism.dp_bucket) on a DP group sharing a network dimension with the TP or "
                "CP group are not modelled: the passes' collectives would queue behind the buckets'"
            )
        layer, embedding, head = ((b.backward.total, p) for b, p in zip(blocks, self._block_parameters(config)))
        order = [head] if stage == plan.pp - 1 else []
        order += [layer] * (model.layers // plan.pp)
        order += [embedding] if stage == 0 else []
        element = operators.dtype_bytes(operators.parse_dtype(config.precision))
        issued, at, bucket = [], 0, 0
        for duration, count in order:
            at, bucket = at + duration, bucket + count * element
            if bucket >= (plan.dp_bucket or 0):
                issued.append((at, bucket))
                bucket = 0
        issued += [(at, bucket)] if bucket else []
        kinds = ("all_reduce",) if plan.zero == 0 else ("reduce_scatter", "all_gather")
        end = reduced = 0
        for time, size in issued:
            for kind in kinds:
                end = max(end, time) + self._timer.collective_ps(kind, size, group)
                reduced = end if kind != "all_gather" else reduced
        return reduced - at, end - reduced

    def _block_parameters(self, config: TransformerConfig) -> tuple[int, int, int]:
        """The parameters of a layer, the embedding and the head on one TP rank."""
        model, plan = config.model, config.parallelism
        return (
            layer_parameters(model, 0, plan.tp, plan.ep).dense,
            embedding_parameters(model, plan.tp),
            head_parameters(model, plan.tp, plan.pp),
        )

    def _with_mirror(self, config: TransformerConfig, stage: int, size: int) -> tuple[int, int]:
        """DualPipe: the DP reduction of the stage's ``size`` bytes of gradients (both its model copies' chunks)
        and, issued next, the all-reduce of the same gradients with the stage's mirror (stage ``pp - 1 - s``, which
        holds the same two chunks) through the NPU's queues: when the later reduction ends, and how long the DP
        all-gather (ZeRO 1 and 2) runs on after it."""
        plan = config.parallelism
        data = self._group(config, "data", stage)
        mirror = tuple(sorted(plan.layout.npu({"pp": s}) for s in {stage, plan.pp - 1 - stage}))
        kinds = ("all_reduce",) if plan.zero == 0 else ("reduce_scatter", "all_gather")
        phases = [self._timer.phases_ps(kind, size, data) for kind in kinds]
        mirrored = self._timer.phases_ps("all_reduce", size, mirror)
        if mirrored is None or any(each is None for each in phases):
            times = [self._timer.collective_ps(kind, size, data) for kind in kinds]
            mirror_ps = self._timer.collective_ps("all_reduce", size, mirror)
            return max(times[0], mirror_ps), sum(times[1:])
        collectives = [Queued(phases[0] or ()), Queued(mirrored)]
        collectives += [Queued(phases[1] or (), after=0)] if len(phases) > 1 else []
        ends = queued_ends(collectives)
        reduce = max(ends[:2])
        return reduce, max(ends[2:], default=reduce) - reduce

    def _with_experts(self, config: TransformerConfig, stage: int, parameters: Parameters) -> tuple[int, int]:
        """The dense bucket's reduction over the DP x CP group and the expert one's over the expert-data-parallel
        group, issued one after the other at once (and with ZeRO 1 and 2 each bucket's all-gather when its
        reduce-scatter ends; on one group, with ``ep = 1``, each collective after the one before, in program order),
        through the NPU's queues (:func:`~stratasim.optimize.first_order_queues.queued_ends`):
        when the last reduction the optimizer step waits for ends, and how long the last all-gather runs on after
        it. With several chunks per collective, taken one after the other."""
        element = operators.dtype_bytes(operators.parse_dtype(config.precision))
        buckets = (
            (parameters.dense * element, self._group(config, "data", stage)),
            (parameters.expert * element, self._group(config, "expert_data", stage)),
        )
        kinds = ("all_reduce",) if config.parallelism.zero == 0 else ("reduce_scatter", "all_gather")
        phases = [self._timer.phases_ps(kind, size, group) for kind in kinds for size, group in buckets]
        if any(each is None for each in phases):
            times = [self._timer.collective_ps(kind, size, group) for kind in kinds for size, group in buckets]
            return sum(times[:2]), sum(times[2:])
        after = (None, 0, 1, 2) if buckets[0][1] == buckets[1][1] else (None, None, 0, 1)
        ends = queued_ends([Queued(each or (), after=after[i]) for i, each in enumerate(phases)])
        reduce = max(ends[:2])
        return reduce, max(ends[2:], default=reduce) - reduce

    def replica_ps(self, config: TransformerConfig, parameters: int, stage: int = 0) -> int:
        """HSDP: the all-reduce across ``stage``'s replicas of the gradient shard of a block of ``parameters``
        parameters, after its reduce-scatter; 0 without HSDP."""
        if config.parallelism.hsdp < 2:
            return 0
        shard = -(-parameters // len(self._group(config, "shard", stage)))
        size = shard * operators.dtype_bytes(operators.parse_dtype(config.precision))
        return self._timer.collective_ps("all_reduce", size, self._group(config, "replica", stage))
