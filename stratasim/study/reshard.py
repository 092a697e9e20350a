"""``stratasim trace reshard``: a Chakra trace re-sharded to another TP, PP or schedule (and DP) by
:mod:`stratasim.workload_layer.traces.reshard`, its split or merged operators priced by a study's compute section
as ``stratasim trace export`` prices them, and written with its new plan."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from stratasim.config.study_file import Study
from stratasim.kernel.errors import WorkloadError
from stratasim.study.compute_setup import open_pricer
from stratasim.workload_layer.traces.convert import write_chakra
from stratasim.workload_layer.traces.pipeline_cut import Schedule
from stratasim.workload_layer.traces.rescale import plan_attributes, refuse_stale
from stratasim.workload_layer.traces.reshard import resharded

__all__ = ["Schedule", "reshard_trace"]


def reshard_trace(
    source: str | Path,
    target: str | Path,
    tp: int,
    pp: int,
    dp: int | None,
    study: Study | None,
    *,
    max_npus: int,
    schedule: Schedule | None = None,
    ep: int | None = None,
) -> tuple[list[Path], tuple[str, ...]]:
    """Write the Chakra trace ``<source>.<rank>.et`` re-sharded to ``tp`` x ``pp`` x ``dp`` (None: its DP) as
    ``<target>.<rank>.et`` and its communicator groups file; return the files written and what was assumed rather
    than inferred. The operators whose work
    changed are priced by ``study``'s compute section, required when TP changes (the study the trace was exported
    from prices them as they would have been priced had it been exported at the new TP). ``schedule`` (None: as
    recorded, 1F1B when PP changes) orders the new pipeline's passes; ``ep`` (None: the recorded one) re-shards
    expert parallelism alone."""
    graphs, plan, assumed = resharded(source, tp, pp, dp, max_npus=max_npus, schedule=schedule, ep=ep)
    refuse_stale(target, plan.npus)
    unpriced = [node for graph in graphs for node in graph.nodes if node.HasField("op") and node.duration_ps == 0]
    if unpriced:
        if study is None or study.compute is None:
            where = "a study without a compute section" if study is not None else "no --study"
            raise WorkloadError(
                f"--study: re-sharding TP or EP splits or merges operators whose new durations must be priced, and {where} "
                "was given: name the study the trace was exported from (its compute section prices them)"
            )
        with ExitStack() as stack:
            durations = open_pricer(study.compute, stack).durations_ps([node.op for node in unpriced])
        for node, duration in zip(unpriced, durations, strict=True):
            node.duration_ps = duration
    sources = [f"rank {npu} of the re-sharded {source}" for npu in range(plan.npus)]
    written = write_chakra(target, graphs, sources, exact_durations=True, metadata=plan_attributes(plan))
    return written, assumed
