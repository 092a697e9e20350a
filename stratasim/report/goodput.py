"""The goodput of a long training run: how much of its wall time is useful work when its components fail.

A pure model (no study, no simulation): the job fails as a Poisson process whose rate is the sum of its components'
(``n / MTBF`` per kind), writes a checkpoint of ``checkpoint_s`` seconds after every ``interval`` of work, and
after a failure restarts (``restart_s``) and redoes the work since its last checkpoint. The optimal interval is
Young's first-order ``sqrt(2 * delta * M)`` refined by Daly's higher-order estimate, the goodput Daly's expected
wall time for exponential failures; docs/how-to/goodput.md derives them and cites the sources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "GoodputFigures",
    "daly_interval",
    "goodput",
    "goodput_figures",
    "job_mtbf",
    "lost_work_per_failure",
    "young_interval",
]


def job_mtbf(counts: Mapping[str, int], mtbf_s: Mapping[str, float]) -> float:
    """The job's mean time between failures in seconds: the inverse of the summed failure rates of ``counts[kind]``
    components of each kind, each failing on average every ``mtbf_s[kind]`` seconds (at least one component)."""
    return 1 / sum(count / mtbf_s[kind] for kind, count in counts.items())


def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal work time between checkpoints: ``sqrt(2 * checkpoint_s * mtbf_s)``."""
    return math.sqrt(2 * checkpoint_s * mtbf_s)


def daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimal work time between checkpoints: for ``delta < 2M``,
    ``sqrt(2 delta M) * (1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9) - delta``, else ``M``."""
    if checkpoint_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = checkpoint_s / (2 * mtbf_s)
    return young_interval(checkpoint_s, mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - checkpoint_s


def goodput(interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """The expected useful fraction of wall time: ``tau / (M e^(R/M) (e^((tau + delta)/M) - 1))`` for work
    ``interval_s`` (tau) between checkpoints of ``checkpoint_s`` (delta), restarts of ``restart_s`` (R) and a job
    MTBF ``mtbf_s`` (M)."""
    segment = (interval_s + checkpoint_s) / mtbf_s
    return interval_s / (mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1(segment))


def lost_work_per_failure(interval_s: float, checkpoint_s: float, mtbf_s: float) -> float:
    """The expected time spent in a segment (work and checkpoint) before a failure ends it, lost with it:
    ``M - (tau + delta) / (e^((tau + delta)/M) - 1)``, about half a segment when failures are rare."""
    segment = interval_s + checkpoint_s
    return mtbf_s - segment / math.expm1(segment / mtbf_s)


@dataclass(frozen=True)
class GoodputFigures:
    """What the model says of a run: its components, the job MTBF, the checkpoint and restart times, the optimal
    intervals (Young's, Daly's, and Daly's rounded to whole steps with its goodput) and the interval the run uses,
    in steps, with its goodput and the work a failure loses. Times in seconds."""

    components: dict[str, int]
    job_mtbf_s: float
    checkpoint_s: float
    restart_s: float
    young_interval_s: float
    daly_interval_s: float
    optimal_interval_steps: int
    optimal_goodput: float
    interval_steps: int
    goodput: float
    lost_work_per_failure_s: float

    def as_dict(self) -> dict[str, object]:
        """The figures as the JSON report's ``goodput`` entry."""
        return dict(vars(self))


def goodput_figures(
    step_s: float,
    counts: Mapping[str, int],
    mtbf_s: Mapping[str, float],
    checkpoint_s: float,
    restart_s: float,
    interval_steps: int | None = None,
) -> GoodputFigures:
    """The figures of a run whose steps take ``step_s``: checkpointing every ``interval_steps`` steps, or at Daly's
    optimum rounded to whole steps (at least one) when None."""
    mtbf = job_mtbf(counts, mtbf_s)
    daly = daly_interval(checkpoint_s, mtbf)
    optimal = max(1, round(daly / step_s))
    chosen = optimal if interval_steps is None else interval_steps
    return GoodputFigures(
        components=dict(counts),
        job_mtbf_s=mtbf,
        checkpoint_s=checkpoint_s,
        restart_s=restart_s,
        young_interval_s=young_interval(checkpoint_s, mtbf),
        daly_interval_s=daly,
        optimal_interval_steps=optimal,
        optimal_goodput=goodput(optimal * step_s, checkpoint_s, restart_s, mtbf),
        interval_steps=chosen,
        goodput=goodput(chosen * step_s, checkpoint_s, restart_s, mtbf),
        lost_work_per_failure_s=lost_work_per_failure(chosen * step_s, checkpoint_s, mtbf),
    )
