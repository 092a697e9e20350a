"""Bad session input (issue 30): session traces with turns out of order or missing, negative think times, a
prefix longer than the prompt, a first turn without an arrival, a mix of schemas, and drawn sessions whose
conversation outgrows the model's context. Each is one message naming the file (never its content) or the key,
the line or session and what is expected, and a non-zero exit from ``check`` and ``run``."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.cli.test_bad_serving_input import refused, study_with, trace_study
from tests.helpers import RunCli
from tests.workload_layer.test_serving_study import STUDY

HEADER = "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (HEADER + "a,0,0,,10,1,,\na,2,,1,10,1,,\n", "t.csv: line 3: turn 2 follows the session's turn 0 (line 2)"),
        (HEADER + "a,0,0,,10,1,,\na,1,,1,10,1,,\na,1,,1,10,1,,\n", "t.csv: line 4: turn 1 comes after the session's"),
        (HEADER + "a,0,0,,10,1,,\na,1,,-0.5,10,1,,\n", "t.csv: line 3: think_s is negative"),
        (HEADER + "a,0,0,,100,1,p,101\n", "t.csv: line 2: prefix_tokens exceed the new_prompt_tokens"),
        (HEADER + "a,0,,,100,1,,\n", "t.csv: line 2: turn 0 has no arrival_s (or arrival_ms)"),
        ("session,turn,arrival_s,prompt_tokens,output_tokens\na,0,0,5,1\n", "t.csv: line 2: turn (a session trace's)"),
    ],
)
def test_a_bad_session_trace_is_refused(run_cli: RunCli, tmp_path: Path, text: str, fragment: str) -> None:
    refused(run_cli, trace_study(tmp_path, "t.csv", text), fragment)


def test_sessions_outgrowing_the_context_are_refused_naming_session_and_turn(run_cli: RunCli, tmp_path: Path) -> None:
    """Turn 2 holds 1,500 + 100 + 1,500 + 100 + 1,500 = 4,700 prompt tokens, beyond the 4,096 of the model."""
    requests = {
        "arrival": {"process": "poisson", "rate": "1/s"},
        "sessions": {
            "count": 5,
            "turns": {"distribution": "fixed", "value": 3},
            "think": {"distribution": "fixed", "value": "1s"},
            "new_prompt": {"distribution": "fixed", "value": 1500},
            "output": {"distribution": "fixed", "value": 100},
        },
    }
    refused(run_cli, study_with(tmp_path, requests), "workload.requests.sessions: session 0 turn 2 has 4700 prompt")


def test_session_keys_beside_count_are_refused(run_cli: RunCli, tmp_path: Path) -> None:
    requests = copy.deepcopy(STUDY["workload"]["requests"])
    requests["sessions"] = {
        "count": 5,
        "turns": {"distribution": "fixed", "value": 2},
        "think": {"distribution": "exponential", "mean": "5s"},
        "new_prompt": {"distribution": "fixed", "value": 100},
        "output": {"distribution": "fixed", "value": 10},
    }
    refused(run_cli, study_with(tmp_path, requests), "workload.requests", "count is drawn per turn by sessions")
