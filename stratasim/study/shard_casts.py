"""Whether a transformer study's ZeRO-3 plan casts its shards (``workload.parallelism.shard_casts``).

Unset, the key follows the compute backend, as ``system.contention`` does: on where every operator is priced by
the ``measured`` backend (operators timed alone, so FSDP's own casts are not in their times), off for the roofline
presets, whose efficiencies were fitted to whole runs and hold that work already.
"""

from __future__ import annotations

from dataclasses import replace

from stratasim.config.study_file import Study
from stratasim.study.compute_setup import backend_names

__all__ = ["with_shard_casts"]

_TIMED_ALONE = "measured"


def with_shard_casts(study: Study) -> Study:
    """``study`` with an unset ``workload.parallelism.shard_casts`` decided by its compute backend (unchanged when
    its workload has no such key or sets it)."""
    config = study.workload.config
    parallelism = getattr(config, "parallelism", None)
    if parallelism is None or getattr(parallelism, "shard_casts", False) is not None:
        return study
    timed_alone = study.compute is not None and set(backend_names(study.compute)) == {_TIMED_ALONE}
    resolved = config.model_copy(update={"parallelism": parallelism.model_copy(update={"shard_casts": timed_alone})})
    return replace(study, workload=replace(study.workload, config=resolved))
