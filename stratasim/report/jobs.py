"""Each job's figures in a study of several jobs: a row of the JSON report's ``jobs`` list and a line of the text.

A job's times are its own: from its ``start`` to the latest finish of its NPUs (``end``), its compute and exposed
communication the means over its NPUs (the wait before its start is neither), for a training job its iteration
throughput over its own NPUs and duration, and for an inference job its serving figures (TTFT, TPOT, tokens/s). A
request-level serving job ends when its own loop does and has its loop's serving figures (percentiles, throughput,
goodput) but no engine figures (compute, exposed communication). The study's total time is the latest end of any
job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stratasim.kernel.npu_ids import npu_ranges
from stratasim.kernel.units import format_time_ps, ps_to_ns
from stratasim.report.serving_row import serving_row

__all__ = ["JobFigures", "job_lines", "job_row"]


@dataclass(frozen=True)
class JobFigures:
    """One job's figures: ``npus`` the NPUs it was placed on (its rank i on the i-th); ``start_ps`` and ``end_ps``
    when it started and when its last NPU finished; ``compute_ps`` and ``exposed_comm_ps`` means over its NPUs; for a
    training job (else None) the iteration's samples per second and model TFLOPS per NPU over its duration; for an
    inference or serving job (else None) its ``serving`` figures (times in ps, as a serving study's report holds
    them). A request-level serving job, which the engine does not run, has no ``compute_ps`` nor
    ``exposed_comm_ps`` (None). ``failed_at_ps`` is when an NPU failure stopped it (None: it ran to its end)."""

    name: str
    kind: str
    npus: tuple[int, ...]
    start_ps: int
    end_ps: int
    compute_ps: float | None
    exposed_comm_ps: float | None
    samples_per_second: float | None = None
    tflops_per_npu: float | None = None
    serving: dict[str, float] | None = None
    failed_at_ps: int | None = None

    @property
    def duration_ps(self) -> int:
        """From the job's start to its end."""
        return self.end_ps - self.start_ps


def job_row(job: JobFigures) -> dict[str, Any]:
    """The JSON report's row of one job (``compute_ns`` and ``exposed_comm_ns`` for a job the engine ran,
    ``iteration_time_ns``... for a training job, ``serving`` for an inference or serving job)."""
    row: dict[str, Any] = {
        "name": job.name,
        "kind": job.kind,
        "npus": len(job.npus),
        "placed": npu_ranges(job.npus),
        "start_ns": ps_to_ns(job.start_ps),
        "end_ns": ps_to_ns(job.end_ps),
        "duration_ns": ps_to_ns(job.duration_ps),
    }
    if job.compute_ps is not None and job.exposed_comm_ps is not None:
        row["compute_ns"] = job.compute_ps / 1000
        row["exposed_comm_ns"] = job.exposed_comm_ps / 1000
    if job.failed_at_ps is not None:
        row["failed_at_ns"] = ps_to_ns(job.failed_at_ps)
    if job.samples_per_second is not None:
        row["iteration_time_ns"] = ps_to_ns(job.duration_ps)
        row["samples_per_second"] = job.samples_per_second
        row["tflops_per_npu"] = job.tflops_per_npu
    if job.serving is not None:
        row["serving"] = serving_row(job.serving)
    return row


_MAX_PLACED = 20  # characters of a job's placement the text shows


def job_lines(jobs: Sequence[JobFigures]) -> list[str]:
    """A table of the jobs: NPUs and where, start, end, duration, mean compute and exposed communication."""
    if not jobs:
        return []
    titles = ("start", "end", "duration", "compute", "exposed comm")
    lines = [
        "",
        f"jobs ({len(jobs)})",
        f"  {'job':<16}{'NPUs':>6}  {'placed':<{_MAX_PLACED}}" + "".join(f"{t:>14}" for t in titles),
    ]
    for job in jobs:
        placed = npu_ranges(job.npus)
        if len(placed) > _MAX_PLACED:
            placed = placed[: _MAX_PLACED - 3] + "..."
        times = (job.start_ps, job.end_ps, job.duration_ps, job.compute_ps, job.exposed_comm_ps)
        line = f"  {job.name:<16}{len(job.npus):>6,}  {placed:<{_MAX_PLACED}}" + "".join(
            f"{'-' if ps is None else format_time_ps(round(ps)):>14}" for ps in times
        )
        if job.failed_at_ps is not None:
            line += f"  stopped: an NPU failed at {format_time_ps(job.failed_at_ps)}"
        if job.samples_per_second is not None:
            line += f"  {job.samples_per_second:,.1f} samples/s, {job.tflops_per_npu:,.1f} TFLOPS per NPU"
        lines.append(line)
        lines += _serving_line(job.serving)
    lines.append("  compute and exposed comm: means over the job's NPUs; duration from its start to its last NPU's end")
    if any(job.compute_ps is None for job in jobs):
        lines.append("  a serving job (-) runs its own request-level loop, not in the engine: its end is the loop's")
    return lines


def _serving_line(serving: dict[str, float] | None) -> list[str]:
    """An inference job's TTFT, TPOT and tokens/s, or a serving job's percentiles, throughput and goodput."""
    if serving is None:
        return []
    if "ttft_p99_ps" not in serving:
        return [
            f"    serving: TTFT {format_time_ps(round(serving['ttft_ps']))}, TPOT "
            f"{format_time_ps(round(serving['tpot_ps']))}, {serving['tokens_per_second']:,.1f} tokens/s"
        ]

    def spread(name: str) -> str:
        return ", ".join(f"{stat} {format_time_ps(round(serving[f'{name}_{stat}_ps']))}" for stat in ("p50", "p99"))

    return [
        f"    serving: {serving['requests']:,.0f} requests; TTFT {spread('ttft')}; TPOT {spread('tpot')}; "
        f"{serving['tokens_per_second']:,.1f} tokens/s; goodput {serving['goodput_requests_per_second']:,.2f} "
        f"requests/s ({serving['slo_attainment']:.1%} within the SLOs)"
    ]
