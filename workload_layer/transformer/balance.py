"""Resolving ``by_device`` splits of a transformer plan into counts, from the time a unit of work takes on each
NPU's device (the rules: :mod:`stratasim.workload_layer.transformer.work_split`)."""

from __future__ import annotations

from collections.abc import Sequence

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.transformer.config import ParallelismConfig, TransformerConfig
from stratasim.workload_layer.transformer.work_split import proportional_split, replica_paces, stage_unit_times

__all__ = ["balanced_config", "wants_balance"]


def wants_balance(plan: ParallelismConfig) -> bool:
    """Whether ``plan`` splits layers or micro-batches ``by_device``."""
    return "by_device" in (plan.stage_layers, plan.batch_split)


def balanced_config(config: TransformerConfig, unit_ps: Sequence[int]) -> TransformerConfig:
    """``config`` with its ``by_device`` splits replaced by the counts they give when a unit of work takes
    ``unit_ps[npu]`` picoseconds on each NPU (index = NPU id); listed and even splits are kept."""
    plan = config.parallelism
    npus = plan.tp * plan.pp * plan.dp
    if len(unit_ps) != npus or min(unit_ps) <= 0:
        raise WorkloadError(
            f"workload.parallelism: balancing to devices needs a positive unit time for each of the {npus} NPUs"
        )
    stage_of = [plan.layout.rank(npu, "pp") for npu in range(npus)]
    stage_layers = plan.stage_layers
    if stage_layers == "by_device":
        chunk = plan.virtual_stages
        times = stage_unit_times(unit_ps, stage_of, plan.pp)
        stage_layers = tuple(chunk * share for share in proportional_split(config.model.layers // chunk, times))
    batch_split = plan.batch_split
    if batch_split == "by_device":
        listed = config.model_copy(update={"parallelism": plan.model_copy(update={"stage_layers": stage_layers})})
        replica_of = [plan.layout.rank(npu, "dp") for npu in range(npus)]
        paces = replica_paces(unit_ps, stage_of, replica_of, listed.stage_layer_counts(), plan.dp)
        group = plan.pp if plan.schedule == "interleaved" else 2 if plan.schedule == "dualpipe" else 1
        shares = proportional_split(plan.batch // plan.micro_batch // group, paces)
        batch_split = tuple(group * share for share in shares)
    update = {"stage_layers": stage_layers, "batch_split": batch_split}
    return config.model_copy(update={"parallelism": plan.model_copy(update=update)})
