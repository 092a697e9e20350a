"""The report's word on NPU failures (``system.failures``): which job each failure stopped, and when.

A failure that stops a single-job study stops the run itself, and the run's ``incomplete`` warning says so; in a
study of several jobs one warning per failure names the NPU, the time and the job it stopped, and what it left
unfinished. A failure that stopped nothing (the NPU held no work, or its job had finished) says that too.
"""

from __future__ import annotations

from collections.abc import Sequence

from stratasim import system_layer
from stratasim.kernel.units import format_time_ps

__all__ = ["failure_warnings"]


def failure_warnings(result: system_layer.SimulationResult, job_names: Sequence[str]) -> tuple[str, ...]:
    """One warning per failure that did not stop the run itself; ``job_names`` are the study's jobs, in order (empty
    for a single-job study)."""
    warnings: list[str] = []
    stopped_jobs = {failure.job for failure in result.failures if failure.stopped}
    stopped_before: set[int] = set()
    for failure in result.failures:
        when = f"NPU {failure.npu} failed at {format_time_ps(failure.at_ps)}"
        if not failure.stopped:
            held = "it held no work" if failure.job < 0 else "its work was already done"
            if failure.job in stopped_before:
                held = f"its job {job_names[failure.job]} had stopped already"
            warnings.append(f"{when}: {held}, so nothing stopped")
        elif job_names:
            said = f" (its {failure.unfinished} could not complete)" if failure.unfinished else ""
            rest = (
                "the other jobs ran to completion"
                if len(stopped_jobs) == 1
                else f"{len(stopped_jobs)} of the {len(job_names)} jobs stopped"
            )
            warnings.append(f"{when}: job {job_names[failure.job]} stopped there{said}; {rest}")
            stopped_before.add(failure.job)
    return tuple(warnings)
