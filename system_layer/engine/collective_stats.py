"""A collective's statistics as the result reports them: its delays as means over the NPUs and chunks."""

from __future__ import annotations

from stratasim.system_layer.result import CollectiveStats
from stratasim.system_layer.scheduler.chunks import Collective

__all__ = ["collective_stats"]


def _mean(total: int, count: int) -> int:
    return total // count if count else 0


def _column_sums(rows: list[list[int]], columns: int) -> list[int]:
    """The sum of each of ``columns`` columns of ``rows`` (zeros when there are no rows)."""
    return [sum(column) for column in zip(*rows)] if rows else [0] * columns


def collective_stats(collective: Collective, number: int) -> CollectiveStats:
    """``collective``'s statistics under id ``number``: its delays as means over the NPUs and chunks that ran
    each phase (one per collective issued: a whole model's iteration has a hundred thousand, so the sums go
    column by column)."""
    runs = collective.phase_runs
    phases = len(collective.phases)
    runs_per_phase = _column_sums(runs, phases)

    def per_phase(sums: list[list[int]]) -> tuple[int, ...]:
        return tuple(map(_mean, _column_sums(sums, phases), runs_per_phase))

    def per_chunk(sums: list[list[int]]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(map(_mean, c, n)) for c, n in zip(sums, runs))

    return CollectiveStats(
        collective_id=number,
        type=collective.kind,
        bytes=collective.bytes,
        group_size=len(collective.group),
        start_ps=collective.start_ps or 0,
        end_ps=collective.end_ps,
        queue_delay_ps_per_phase=per_phase(collective.queue_delay_sum),
        network_delay_ps_per_phase=per_phase(collective.network_delay_sum),
        phase_dims=tuple(lines.dim for lines in collective.phases),
        phase_collectives=collective.phase_collectives,
        queue_delay_ps_per_chunk=per_chunk(collective.queue_delay_sum),
        network_delay_ps_per_chunk=per_chunk(collective.network_delay_sum),
        communicator=collective.communicator,
    )
