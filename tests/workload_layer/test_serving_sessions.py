"""Sessions as a serving workload: the seeded generator (turns, think times, the prompt-growth rule, shared
prefixes), the closed loop that releases a turn when its previous one finishes, and the per-turn figures, against
the known prices of tests/workload_layer/test_serving.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.kernel.errors import WorkloadError
from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.iteration import iteration_shape
from stratasim.workload_layer.serving.metrics import serving_metrics
from stratasim.workload_layer.serving.request_config import MAX_REQUESTS, RequestsConfig
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.simulation import simulate_pool, simulate_pools
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.workload_layer.test_serving import (
    MODEL,
    MS,
    config,
    disaggregated,
    fixed_transfer,
    linear_price,
    linear_pricer,
    poisson,
)

SECOND = 10**12


def sessions(count: int = 50, turns: Any = 3, think: str = "2s", new: Any = 100, output: Any = 20) -> dict[str, Any]:
    """``requests`` keys of ``count`` sessions (an int is a fixed distribution)."""

    def fixed(value: Any) -> Any:
        return {"distribution": "fixed", "value": value} if isinstance(value, int) else value

    return {
        "seed": 4,
        "arrival": {"process": "poisson", "rate": "1/s"},
        "sessions": {
            "count": count,
            "turns": fixed(turns),
            "think": {"distribution": "fixed", "value": think},
            "new_prompt": fixed(new),
            "output": fixed(output),
        },
    }


def drawn(requests: dict[str, Any]) -> tuple[Request, ...]:
    return synthetic_requests(RequestsConfig.model_validate(requests))


def test_a_seed_gives_the_same_sessions_bit_for_bit_and_seeds_differ() -> None:
    varied = sessions(
        turns={"distribution": "uniform", "low": 1, "high": 5},
        new={"distribution": "lognormal", "median": 200, "sigma": 0.8, "max": 2000},
        output={"distribution": "uniform", "low": 1, "high": 300},
    )
    varied["sessions"]["think"] = {"distribution": "lognormal", "median": "3s", "sigma": 1.0, "max": "60s"}
    varied["shared_prefix"] = {"tokens": 64, "groups": 3}
    first, again = drawn(varied), drawn(varied)
    assert first == again
    assert first != drawn({**varied, "seed": 5})
    assert {request.shared_prefix for request in first} == {0, 1, 2}
    assert 1 < sum(request.turn == 0 for request in first) == 50 < len(first)


def test_each_later_turn_holds_the_conversation_so_far_and_its_new_tokens() -> None:
    """Turn t + 1's prompt = turn t's prompt + turn t's output + its new tokens; the first turn's is the shared
    prefix and its new tokens; later turns follow the one before, after the think time, arrival unknown (-1)."""
    spec = sessions(
        turns={"distribution": "uniform", "low": 1, "high": 4},
        output={"distribution": "uniform", "low": 1, "high": 50},
    )
    spec["shared_prefix"] = {"tokens": 32, "groups": 2}
    requests = drawn(spec)
    for request in requests:
        assert request.index == requests.index(request)
        assert request.shared_tokens == 32 and request.shared_prefix in (0, 1)
        if request.turn == 0:
            assert request.prompt_tokens == 32 + 100 and request.follows == -1 and request.arrival_ps > 0
            continue
        previous = requests[request.index - 1]
        assert request.follows == previous.index and request.session == previous.session
        assert request.turn == previous.turn + 1 and request.shared_prefix == previous.shared_prefix
        assert request.prompt_tokens == previous.prompt_tokens + previous.output_tokens + 100
        assert request.arrival_ps == -1 and request.think_ps == 2 * SECOND
    firsts = [request.arrival_ps for request in requests if request.follows < 0]
    assert firsts == sorted(firsts)


def test_a_shared_prefix_lengthens_drawn_prompts_and_changes_no_other_draw() -> None:
    plain = poisson("5/s", 200, 300, 20, seed=7)
    alone = drawn(plain)
    shared = drawn({**plain, "shared_prefix": {"tokens": 500, "groups": 4}})
    assert [(r.arrival_ps, r.prompt_tokens + 500, r.output_tokens) for r in alone] == [
        (r.arrival_ps, r.prompt_tokens, r.output_tokens) for r in shared
    ]
    assert all(r.shared_tokens == 500 and 0 <= r.shared_prefix < 4 for r in shared)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count": 3}, "count is drawn per turn by sessions"),
        ({"arrival": None}, "arrival is required: the sessions' first turns arrive by it"),
        ({"trace": {"path": "t.csv"}}, "give either trace or"),
        (
            {
                "sessions": {
                    **sessions()["sessions"],
                    "count": MAX_REQUESTS,
                    "turns": {"distribution": "fixed", "value": 2},
                }
            },
            "make up to 20,000,000 requests, beyond the 10,000,000",
        ),
        (
            {"sessions": {**sessions()["sessions"], "think": {"distribution": "fixed", "value": "-1s"}}},
            "think.fixed.value",
        ),
        (
            {"sessions": {**sessions()["sessions"], "think": {"distribution": "exponential", "mean": "7200s"}}},
            "at most 1 h",
        ),
        ({"shared_prefix": {"tokens": 0}}, "shared_prefix.tokens"),
    ],
)
def test_bad_session_keys_say_what_is_wrong(change: dict[str, Any], message: str) -> None:
    spec = {key: value for key, value in {**sessions(), **change}.items() if value is not None}
    with pytest.raises(ValidationError, match=message):
        RequestsConfig.model_validate(spec)


def test_a_prompt_outgrowing_the_context_names_its_session_and_turn() -> None:
    """Turn 2 of every session holds 3,000 + 1,000 + 3,000 prompt tokens, plus 1,000 output: beyond 4,096."""
    model = {**MODEL, "seq_len": 4096}
    spec = {"model": model, "pools": [{"replicas": 1}], "requests": sessions(turns=2, new=3000, output=1000)}
    workload = ServingRequestsWorkload(ServingWorkloadConfig.model_validate(spec))
    with pytest.raises(WorkloadError, match=r"workload.requests.sessions: session 0 turn 1 has 7000 prompt and 1000 "):
        workload.requests()
    first = copy.deepcopy(spec)
    first["requests"]["sessions"]["new_prompt"]["value"] = 3500
    with pytest.raises(ValidationError, match=r"workload.requests.sessions: a new_prompt of up to 3500 tokens"):
        ServingWorkloadConfig.model_validate(first)


def test_a_follower_arrives_its_think_time_after_its_predecessor_finishes() -> None:
    """Two lone sessions of two turns: turn 1 arrives exactly turn 0's finish + 2 s, and its TTFT, from that
    arrival, is the price of its lone 100 + 20 + 100-token prefill."""
    cfg = config({**sessions(count=2, turns=2), "arrival": {"process": "fixed", "rate": "0.01/s"}})
    requests = synthetic_requests(cfg.requests)
    run = simulate_pool(requests, cfg.pools[0], 100_000, linear_pricer, cfg.bucket)
    served = {sequence.request.index: sequence for sequence in run.sequences}
    assert [sequence.request.index for sequence in run.sequences] == [0, 1, 2, 3]
    for first, later in ((0, 1), (2, 3)):
        assert served[later].request.arrival_ps == served[first].finish_ps + 2 * SECOND
        prefill = linear_price(iteration_shape([(220, 220)], [], 1, 16))
        assert served[later].first_token_ps - served[later].request.arrival_ps == prefill
    figures = serving_metrics(run, cfg.slo, 1)
    assert figures["sessions"] == 2 and figures["turns_per_session"] == 2
    assert figures["ttft_later_turns_p99_ps"] == linear_price(iteration_shape([(220, 220)], [], 1, 16))
    assert figures["ttft_first_turns_p99_ps"] == linear_price(iteration_shape([(100, 100)], [], 1, 16))


def test_a_follower_without_think_time_joins_the_next_iteration() -> None:
    """Think time 0: turn 1 arrives as turn 0's last iteration ends and starts the replica's next iteration
    there, as an arrival at that instant would."""
    cfg = config({**sessions(count=1, turns=3, think="0s"), "arrival": {"process": "fixed", "rate": "1/s"}})
    run = simulate_pool(synthetic_requests(cfg.requests), cfg.pools[0], 100_000, linear_pricer, cfg.bucket)
    done = [sequence for sequence in sorted(run.sequences, key=lambda s: s.request.index)]
    for before, after in zip(done, done[1:]):
        assert after.request.arrival_ps == before.finish_ps == after.scheduled_ps


def test_sessions_cross_disaggregated_pools() -> None:
    """A turn finishes on a decode replica and its next turn enters at a prefill replica: all finish, each later
    turn arriving its think time after the one before finished."""
    cfg = disaggregated(
        {**sessions(count=20, turns=3, think="10ms"), "arrival": {"process": "poisson", "rate": "20/s"}}
    )
    setups = [PoolSetup(pool, 100_000, linear_pricer) for pool in cfg.pools]
    run = simulate_pools(synthetic_requests(cfg.requests), setups, cfg.bucket, fixed_transfer)
    served = {sequence.request.index: sequence for sequence in run.sequences}
    assert len(served) == 60
    for sequence in served.values():
        request = sequence.request
        if request.follows >= 0:
            assert request.arrival_ps == served[request.follows].finish_ps + 10 * MS
        assert sequence.first_token_ps > request.arrival_ps


def test_runs_without_sessions_report_no_session_figures() -> None:
    cfg = config(poisson("5/s", 30, 100, 5))
    run = simulate_pool(synthetic_requests(cfg.requests), cfg.pools[0], 100_000, linear_pricer, cfg.bucket)
    assert not any("turn" in name or "session" in name for name in serving_metrics(run, cfg.slo, 1))


def test_a_request_following_a_later_one_is_refused() -> None:
    requests = (Request(0, 0, 10, 2, follows=-1), Request(1, -1, 10, 2, follows=2), Request(2, 5, 10, 2))
    cfg = config(poisson("5/s", 3, 10, 2))
    with pytest.raises(WorkloadError, match="request 1 follows request 2: a request follows an earlier one"):
        simulate_pool(requests, cfg.pools[0], 1000, linear_pricer, cfg.bucket)


def _with_sessions(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (tests/workload_layer/test_serving_jobs.py's shared study, or its serving job alone) with its serving
    job running sessions."""
    serve = data["workload"]["jobs"][-1]["workload"] if "jobs" in data["workload"] else data["workload"]
    drawn = serve["requests"]
    serve["requests"] = {
        "seed": 1,
        "arrival": drawn["arrival"],
        "sessions": {
            "count": 3,
            "turns": {"distribution": "fixed", "value": 2},
            "think": {"distribution": "fixed", "value": "1ms"},
            "new_prompt": drawn["prompt"],
            "output": drawn["output"],
        },
    }
    return data


def test_a_replayed_serving_job_of_sessions_gives_its_standalone_figures_alone_and_runs_beside_training() -> None:
    """Replayed alone its every time is the standalone run's (later turns' arrivals included); beside a training
    job its later turns keep their standalone arrivals while its iterations slow, and every turn is served."""
    from tests.workload_layer.test_serving_jobs import _alone, _run, _shared, _without

    data = _with_sessions(_without(_shared(), 1))
    data["workload"]["jobs"][0]["place"] = "0-3"
    (serve,) = _run(data).jobs
    alone = _run(_with_sessions(_alone(_shared(), 1)) | {"network": data["network"]})
    assert serve.serving == alone.serving and alone.serving is not None and alone.serving["sessions"] == 3
    (_, shared) = _run(_with_sessions(_shared())).jobs
    assert (
        shared.serving is not None and shared.serving["requests"] == 6 and shared.serving["ttft_later_turns_p50_ps"] > 0
    )
