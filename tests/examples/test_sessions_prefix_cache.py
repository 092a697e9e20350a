"""The two-turn conversations example (``examples/serving/llama3_8b_h100_sessions.yaml``) with prefix caching: what
each request finds cached against the hand calculation, the figures the report gives, and the cache switched off
giving the example's figures from before prefix caching existed, to the picosecond."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.config.study_file import parse_study
from stratasim.kernel import registry
from stratasim.study.budget import DEFAULT_BUDGET
from stratasim.study.serving import ServedRun, serve
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serving" / "llama3_8b_h100_sessions.yaml"
BLOCK = 16
SYSTEM_PROMPT = 256
UNCACHED_TOTAL_PS = 530_625_827_542_618
"""The example's simulated time without prefix caching, pinned before the cache existed."""


def _serve(prefix_caching: bool) -> tuple[ServedRun, PoolRun]:
    """The example run with ``prefix_caching`` on or off: its figures and its loop's record."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["pools"][0]["scheduler"]["prefix_caching"] = prefix_caching
    study = parse_study(data, str(EXAMPLE))
    workload = {key: value for key, value in data["workload"].items() if key != "kind"}
    config = ServingRequestsWorkload.Config.model_validate(workload)
    runs: list[PoolRun] = []
    served = serve(study, registry.load("workload", "serving")(config), DEFAULT_BUDGET, runs=runs)
    return served, runs[0]


@pytest.fixture(scope="module")
def cached() -> tuple[ServedRun, PoolRun]:
    return _serve(True)


def _second_turn_hit(first: Request, second: Request) -> int:
    """Tokens a second turn finds cached: the full blocks of what its first turn computed (its prompt and output
    but the last token, whose keys and values are never computed), never the whole of its own prompt."""
    computed = first.prompt_tokens + first.output_tokens - 1
    return min(computed // BLOCK, (second.prompt_tokens - 1) // BLOCK) * BLOCK


def test_every_second_turn_finds_its_first_turns_blocks_and_first_turns_their_system_prompt(
    cached: tuple[ServedRun, PoolRun],
) -> None:
    _, run = cached
    by_index = {sequence.request.index: sequence for sequence in run.sequences}
    assert run.preemptions == 0 and len(by_index) == 2_000
    first_turn_hits = []
    for sequence in by_index.values():
        request = sequence.request
        if request.turn == 1:
            assert sequence.found == _second_turn_hit(by_index[request.follows].request, request)
        else:
            first_turn_hits.append(sequence.found)
    # A first turn finds its group's system prompt once a turn of that group has prefilled it: all but the first
    # of each of the four groups, and those arriving while the first is still prefilling.
    assert set(first_turn_hits) <= {0, SYSTEM_PROMPT}
    assert 4 <= first_turn_hits.count(0) <= 20


def test_the_report_gives_the_hit_rate_and_the_tokens_not_prefilled(cached: tuple[ServedRun, PoolRun]) -> None:
    served, run = cached
    found = sum(sequence.found for sequence in run.sequences)
    prompts = sum(sequence.request.prompt_tokens for sequence in run.sequences)
    assert served.figures["prefix_tokens_saved"] == found
    assert served.figures["prefix_cache_hit_rate"] == pytest.approx(found / prompts, rel=1e-12)
    assert 0.4 < served.figures["prefix_cache_hit_rate"] < 0.6


def test_second_turns_ttft_falls_with_the_share_of_their_prompt_cached(cached: tuple[ServedRun, PoolRun]) -> None:
    """Without the cache a second turn prefills its whole prompt; with it, only what its first turn did not
    compute, so its time to first token falls roughly as the share cached (the attention over the cached context
    is still paid)."""
    served, run = cached
    figures = served.figures
    assert figures["ttft_later_turns_p50_ps"] < 0.6 * figures["ttft_mean_no_prefix_cache_ps"]
    second = [sequence for sequence in run.sequences if sequence.request.turn == 1]
    share = sum(sequence.found for sequence in second) / sum(sequence.request.prompt_tokens for sequence in second)
    assert 0.5 < share < 0.9


def test_with_the_cache_off_the_example_gives_its_figures_from_before_the_cache(
    cached: tuple[ServedRun, PoolRun],
) -> None:
    served, run = _serve(False)
    assert served.result.total_time_ps == UNCACHED_TOTAL_PS
    assert all(sequence.found == 0 for sequence in run.sequences)
    figures, with_cache = served.figures, cached[0].figures
    for statistic in ("mean", "p50", "p90", "p99"):
        assert with_cache[f"ttft_{statistic}_no_prefix_cache_ps"] == figures[f"ttft_{statistic}_ps"]
