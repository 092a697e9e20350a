"""The Monte-Carlo mode: a study's workload simulated again for each seeded sample of its ``system.variability``,
and the distribution of its step time (see docs/how-to/stragglers.md).

Sample ``k`` (from 0) draws with seed ``variability.seed + k``; sample 0 is the run the rest of the report
describes. The graphs are built once and re-simulated, in this process.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.units import ps_to_ns
from stratasim.system_layer import SimulationResult
from stratasim.system_layer.options import SystemOptions
from stratasim.system_layer.variability import Variability

__all__ = ["sample_count", "sample_figures"]


def sample_count(asked: int | None, system: SystemOptions, *, engine: bool) -> int | None:
    """How many samples to run: those asked for (``--samples``), else the study's ``variability.samples``; None
    when neither asks (no Monte-Carlo figures). Slow-downs, variability and samples need an ``engine`` study: a
    request-level serving study, which the engine does not run, refuses them."""
    variability = system.variability
    count = asked if asked is not None else None if variability is None else variability.samples
    if not engine and (system.perturbed or system.failures or (count or 1) > 1):
        raise StrataSimError(
            "system.slowdown, system.variability and --samples apply to studies the engine runs (so does "
            "system.failures); a request-level "
            "serving workload prices its iterations without it: remove them"
        )
    return count


def sample_figures(
    first: SimulationResult,
    simulate_sample: Callable[[int], SimulationResult],
    count: int,
    variability: Variability | None,
) -> dict[str, Any]:
    """The step-time distribution over ``count`` samples of ``variability`` (none: all alike): ``first`` (sample 0)
    and ``simulate_sample(k)`` for the others, whose results are dropped once measured.

    Percentiles interpolate linearly between the sorted samples (numpy's default). ``slowest_rank_share`` is the
    mean over samples of (the slowest NPU's compute time - the median NPU's) / step: the share of the step the
    others spend waiting for the slowest one's extra compute when a step synchronises them (compute then an
    all-reduce); 0 when all NPUs compute alike.
    """
    times = [first.total_time_ps]
    shares = [_slowest_rank_share(first)]
    for sample in range(1, count):
        result = simulate_sample(sample)
        times.append(result.total_time_ps)
        shares.append(_slowest_rank_share(result))
    ns = np.asarray([ps_to_ns(time_ps) for time_ps in times], dtype=np.float64)
    p50, p90, p99 = (float(value) for value in np.percentile(ns, [50, 90, 99]))
    return {
        "count": count,
        "seed": 0 if variability is None else variability.seed,
        "p50_ns": p50,
        "p90_ns": p90,
        "p99_ns": p99,
        "mean_ns": float(ns.mean()),
        "min_ns": float(ns.min()),
        "max_ns": float(ns.max()),
        "stdev_ns": float(ns.std(ddof=1)) if count > 1 else 0.0,
        "slowest_rank_share": statistics.fmean(shares),
        "times_ns": ns.tolist(),
    }


def _slowest_rank_share(result: SimulationResult) -> float:
    """(the slowest NPU's compute time - the median NPU's) / step of one run (0 for an empty one)."""
    if result.total_time_ps <= 0 or not result.per_npu:
        return 0.0
    compute = [npu.compute_ps for npu in result.per_npu]
    return (max(compute) - statistics.median(compute)) / result.total_time_ps
