"""A collective's reported delays are means: per phase, the phase's delay summed over chunks (and NPUs) divided by
how many chunk runs it had; per chunk, each chunk's sum by its runs; 0 where nothing ran. The engine sums column
by column for speed; this checks it against those definitions for any shape of sums."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from stratasim.system_layer.engine.collective_stats import collective_stats


@st.composite
def collectives(draw: st.DrawFn) -> Any:
    phases, chunks = draw(st.integers(1, 3)), draw(st.integers(0, 4))

    def table(values: st.SearchStrategy[int]) -> list[list[int]]:
        return [draw(st.lists(values, min_size=phases, max_size=phases)) for _ in range(chunks)]

    return SimpleNamespace(
        id=1,
        kind="all_reduce",
        bytes=64,
        group=(0, 1),
        start_ps=None,
        end_ps=9,
        phase_collectives=(),
        communicator="tp",
        phases=[SimpleNamespace(dim=d) for d in range(phases)],
        phase_runs=table(st.integers(0, 4)),
        queue_delay_sum=table(st.integers(0, 10**9)),
        network_delay_sum=table(st.integers(0, 10**9)),
    )


def _mean(total: int, count: int) -> int:
    return total // count if count else 0


@given(collectives())
def test_delays_are_means_over_the_runs(collective: Any) -> None:
    stats = collective_stats(collective, collective.id)
    assert stats.communicator == "tp"
    runs, phases = collective.phase_runs, range(len(collective.phases))
    for sums, per_phase, per_chunk in (
        (collective.queue_delay_sum, stats.queue_delay_ps_per_phase, stats.queue_delay_ps_per_chunk),
        (collective.network_delay_sum, stats.network_delay_ps_per_phase, stats.network_delay_ps_per_chunk),
    ):
        assert per_phase == tuple(_mean(sum(c[p] for c in sums), sum(c[p] for c in runs)) for p in phases)
        assert per_chunk == tuple(tuple(_mean(s, n) for s, n in zip(c, r)) for c, r in zip(sums, runs))
