"""Bad serving input (issue 27): request traces and arrival processes that once hung, overflowed int64, gave a
traceback, read a whole file before the budget refused it or silently chose a column. Each is now one message
naming the file (never its content), the line or key and what is expected, and a non-zero exit from ``check`` and
``run``, within seconds."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from stratasim.kernel.errors import SimulationError, WorkloadError
from stratasim.kernel.serving import Iteration
from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.request_config import ARRIVAL_LIMIT_PS, RequestsConfig
from stratasim.workload_layer.serving.requests import Request, synthetic_requests
from stratasim.workload_layer.serving.simulation import simulate_pool
from stratasim.workload_layer.serving.trace_file import read_trace
from tests.helpers import RunCli
from tests.workload_layer.test_serving_study import STUDY

HORIZON = "beyond the simulator's horizon: arrivals within 2^62 ps"
SECRET = "sekrit-cell"  # written into bad cells: no message may echo it


def study_with(tmp_path: Path, requests: dict[str, Any]) -> Path:
    data = copy.deepcopy(STUDY)
    data["workload"]["requests"] = requests
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(data))
    return path


def trace_study(tmp_path: Path, name: str, text: str) -> Path:
    trace = tmp_path / name
    trace.write_text(text)
    return study_with(tmp_path, {"trace": {"path": str(trace)}})


def refused(run_cli: RunCli, study: Path, *fragments: str, options: tuple[str, ...] = ()) -> None:
    """``check`` and ``run`` both end non-zero with one message holding ``fragments``."""
    for command in ("check", "run"):
        code, _, err = run_cli(command, str(study), *options)
        assert code != 0, command
        assert err.startswith("error: ") and "Traceback" not in err and SECRET not in err, err
        for fragment in fragments:
            assert fragment in err, err


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,2\n10000000,10,2\n", ("line 3: arrival_s", HORIZON)),
        ("t.csv", "arrival_ms,prompt_tokens,output_tokens\n1e40,10,2\n", ("line 2: arrival_ms", HORIZON)),
        (
            "azure.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,10,2\n2024-03-01 00:00:00,10,2\n",
            ("line 3: TIMESTAMP lies 105.2 days after the trace's first", HORIZON),
        ),
    ],
)
def test_an_arrival_beyond_the_horizon_is_refused(
    run_cli: RunCli, tmp_path: Path, name: str, text: str, fragments: tuple[str, ...]
) -> None:
    refused(run_cli, trace_study(tmp_path, name, text), f"{name}: ", *fragments)


def test_the_last_arrival_within_the_horizon_is_served(run_cli: RunCli, tmp_path: Path) -> None:
    seconds = ARRIVAL_LIMIT_PS // 10**12
    study = trace_study(tmp_path, "t.csv", f"arrival_s,prompt_tokens,output_tokens\n0,10,2\n{seconds},10,2\n")
    code, out, err = run_cli("run", str(study), "--json")
    assert code == 0, err
    serving = json.loads(out)["serving"]
    assert serving["requests"] == 2 and 0 < serving["ttft_p99_ns"] < 10**9


@pytest.mark.parametrize(
    ("rate", "count", "fragments"),
    [
        ("1e-5/s", 100, ("workload.requests", "arrival.rate: 100 requests at 1e-05/s", HORIZON)),
        ("1e-400/s", 3, ("workload.requests.arrival.rate", "10^-6/s to 10^6/s")),
    ],
)
def test_a_tiny_rate_is_refused_before_it_overflows(
    run_cli: RunCli, tmp_path: Path, rate: str, count: int, fragments: tuple[str, ...]
) -> None:
    requests = copy.deepcopy(STUDY["workload"]["requests"]) | {"count": count}
    requests["arrival"] = {"process": "poisson", "rate": rate}
    refused(run_cli, study_with(tmp_path, requests), *fragments)


def test_drawn_arrivals_beyond_the_horizon_are_an_error_not_int64_wraparound() -> None:
    valid = RequestsConfig.model_validate(STUDY["workload"]["requests"])
    bursty = valid.model_copy(update={"count": 50, "arrival": valid.arrival.model_copy(update={"rate": 1e-5})})  # type: ignore[union-attr]
    with pytest.raises(WorkloadError, match=r"workload.requests.arrival: the 50 requests .* beyond the simulator"):
        synthetic_requests(bursty)


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("t.csv", f"arrival_s,prompt_tokens,output_tokens\n{'1' * 5000},10,2\n", ("line 2: arrival_s must be",)),
        ("t.csv", f"arrival_s,prompt_tokens,output_tokens\n0,{'9' * 5000},2\n", ("line 2: prompt_tokens must be",)),
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\n0,²,2\n", ("line 2: prompt_tokens must be a whole number",)),
        (
            "azure.csv",
            f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.{'4' * 5000},10,2\n",
            ("line 2: TIMESTAMP must read like",),
        ),
        ("t.jsonl", f'{{"arrival_s": {"7" * 4000}, "prompt_tokens": 1, "output_tokens": 1}}\n', ("arrival_s must be",)),
        ("t.csv", f"arrival_s,prompt_tokens,output_tokens\n{SECRET},10,2\n", ("line 2: arrival_s must be",)),
    ],
)
def test_a_number_of_thousands_of_digits_is_one_message(
    run_cli: RunCli, tmp_path: Path, name: str, text: str, fragments: tuple[str, ...]
) -> None:
    refused(run_cli, trace_study(tmp_path, name, text), *fragments)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n{"arrival_s": 1, "prompt": 1, "output": 1}\n',
            ("t.jsonl: line 2: no prompt_tokens: every row needs arrival_s, prompt_tokens, output_tokens",),
        ),
        (
            '{"TIMESTAMP": "2023-11-16 18:15:46", "ContextTokens": 1, "GeneratedTokens": 1}\n{"arrival_s": 1}\n',
            ("t.jsonl: line 2: no TIMESTAMP",),
        ),
        (
            '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n'
            '{"arrival_s": 1, "arrival_ms": 5, "prompt_tokens": 1, "output_tokens": 1}\n',
            ("t.jsonl: line 2: both arrival_s and arrival_ms: give one arrival column",),
        ),
        ("[1, 2]\n", ("t.jsonl: line 1: expected a JSON object",)),
    ],
)
def test_jsonl_rows_with_different_keys_are_one_message(
    run_cli: RunCli, tmp_path: Path, text: str, fragments: tuple[str, ...]
) -> None:
    refused(run_cli, trace_study(tmp_path, "t.jsonl", text), *fragments)


@pytest.mark.parametrize(
    "header",
    ["arrival_s,arrival_ms,prompt_tokens,output_tokens", "TIMESTAMP,arrival_s,ContextTokens,GeneratedTokens"],
)
def test_two_arrival_columns_are_an_error_not_a_choice(run_cli: RunCli, tmp_path: Path, header: str) -> None:
    cells = "2023-11-16 18:15:46,1,10,2" if header.startswith("TIMESTAMP") else "1,1000,10,2"
    first, second = header.split(",")[:2]
    study = trace_study(tmp_path, "t.csv", f"{header}\n{cells}\n")
    refused(run_cli, study, f"t.csv: line 2: both {first} and {second}: give one arrival column")


def test_a_big_trace_is_refused_by_the_budget_as_it_is_read(run_cli: RunCli, tmp_path: Path) -> None:
    """200,000 requests (6 MB) against a budget of 1,024: refused having read 1,025 rows, not the whole file."""
    trace = tmp_path / "t.csv"
    with trace.open("w") as file:
        file.write("arrival_s,prompt_tokens,output_tokens\n")
        file.writelines(f"{i / 1000},{100 + i % 900},{1 + i % 50}\n" for i in range(200_000))
    study = study_with(tmp_path, {"trace": {"path": str(trace)}})
    refused(run_cli, study, "more than 1,024 requests", "--max-memory", options=("--max-memory", "2MiB"))
    assert len(read_trace(trace, most=1024)) == 1025


def test_a_trace_longer_than_the_most_a_study_serves_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("stratasim.workload_layer.serving.trace_file.MAX_REQUESTS", 3)
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * 4)
    with pytest.raises(Exception, match="t.csv: the trace holds more than 3 requests"):
        read_trace(trace)
    assert len(read_trace(trace, limit=3)) == 3


def test_no_row_past_the_limit_is_read(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"arrival_s,prompt_tokens,output_tokens\n1,1,1\n0,2,1\n{SECRET},1,1\n")
    assert [request.prompt_tokens for request in read_trace(trace, limit=2)] == [2, 1]


def test_serving_past_the_int64_picoseconds_is_an_error_not_a_wrapped_time() -> None:
    """Requests at the horizon, each iteration priced at 2^61 ps: the loop stops with an error once its time would
    pass the int64 picoseconds, never reporting a time beyond them (nor spinning, as its old 2^62 sentinel did)."""

    def slow(iteration: Iteration) -> int:
        return 1 << 61

    data = copy.deepcopy(STUDY["workload"])
    del data["kind"]
    pool = ServingWorkloadConfig.model_validate(data).pools[0]
    requests = [Request(0, ARRIVAL_LIMIT_PS - 1, 10, 8), Request(1, ARRIVAL_LIMIT_PS, 10, 8)]
    with pytest.raises(SimulationError, match="past the int64 picoseconds"):
        simulate_pool(requests, pool, 10_000, slow, 16)


@pytest.mark.parametrize(
    ("pool", "fragments"),
    [
        ({"router": "prefix_aware"}, ("workload.pools.0.router: prefix_aware", "scheduler.prefix_caching: true")),
        ({"router": "by_cache"}, ("workload.pools[0].router", "'session_affinity' or 'random'")),
        ({"routing_balance": {"abs": 4}}, ("workload.pools.0.routing_balance applies to router: prefix_aware only",)),
        (
            {"router": "prefix_aware", "scheduler": {"prefix_caching": True}, "routing_balance": {"rel": "x"}},
            ("workload.pools[0].routing_balance.rel",),
        ),
    ],
)
def test_bad_router_keys_are_one_message(
    run_cli: RunCli, tmp_path: Path, pool: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    data = copy.deepcopy(STUDY)
    data["workload"]["pools"][0].update(pool)
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(data))
    refused(run_cli, path, *fragments)
