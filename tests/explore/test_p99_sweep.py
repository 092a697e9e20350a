"""A sweep can minimise the tail of a Monte-Carlo study: ``samples.p99_ns`` is a report number objectives name."""

from __future__ import annotations

from pathlib import Path

from stratasim.explore import ResultStore, load_sweep, run_sweep

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "explore" / "stragglers_p99.yaml"


def test_jitter_ranks_all_reduce_algorithms_by_their_sequential_steps(tmp_path: Path) -> None:
    """examples/explore/stragglers_p99.yaml: each of a ring's 2 (n - 1) steps waits for a jittered message, against
    halving-doubling's 2 log2 n and direct's one exchange, so the p99 ranks them direct < halving-doubling < ring."""
    sweep = load_sweep(EXAMPLE)
    outcome = run_sweep(sweep, ResultStore(tmp_path / "p99.db", sweep.section.model_dump_json()))
    p99 = {r.params["system.algorithm"]: r.metrics["samples.p99_ns"] for r in outcome.trials}
    assert p99["direct"] < p99["halving_doubling"] < p99["ring"]
    (best,) = outcome.pareto
    assert best.params == {"system.algorithm": "direct"}
    assert all(r.metrics["samples.count"] == 100 for r in outcome.trials)
