"""Session traces (docs/how-to/sessions.md): a session trace's turns as closed-loop requests, a plain trace's
session and prefix columns, and one clear message for each bad input, naming the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.kernel.errors import InputError
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.trace_file import read_trace

SECOND = 10**12
HEADER = "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"


def read(tmp_path: Path, text: str, name: str = "t.csv") -> tuple[Request, ...]:
    path = tmp_path / name
    path.write_text(text)
    return read_trace(path)


def test_a_session_trace_gives_closed_loop_turns_session_by_session(tmp_path: Path) -> None:
    """Sessions interleave in the file; they come out by first arrival, each turn's prompt the conversation so far
    (a: 100, 100 + 10 + 30 = 140, 140 + 7 + 10 = 157), later turns following the one before after their think."""
    text = HEADER + "a,0,0.5,,100,10,sys,20\nb,0,0.1,,50,5,,\na,1,,2,30,7,,\nb,1,,1.5,40,3,,\na,2,,0,10,1,sys,20\n"
    requests = read(tmp_path, text)
    assert requests == (
        Request(0, SECOND // 10, 50, 5, 0, 0),
        Request(1, -1, 95, 3, 0, 1, follows=0, think_ps=3 * SECOND // 2),
        Request(2, SECOND // 2, 100, 10, 1, 0, 0, 20),
        Request(3, -1, 140, 7, 1, 1, 0, 20, follows=2, think_ps=2 * SECOND),
        Request(4, -1, 157, 1, 1, 2, 0, 20, follows=3, think_ps=0),
    )


def test_a_jsonl_session_trace_may_leave_keys_out_and_use_milliseconds(tmp_path: Path) -> None:
    text = (
        '{"session": 7, "turn": 0, "arrival_ms": 250, "new_prompt_tokens": 64, "output_tokens": 8}\n'
        '{"session": 7, "turn": 1, "think_ms": 1500, "new_prompt_tokens": 16, "output_tokens": 4, "arrival_s": null}\n'
    )
    assert read(tmp_path, text, "t.jsonl") == (
        Request(0, SECOND // 4, 64, 8, 0, 0),
        Request(1, -1, 88, 4, 0, 1, follows=0, think_ps=3 * SECOND // 2),
    )


def test_a_plain_trace_with_session_and_prefix_columns_stays_open_loop(tmp_path: Path) -> None:
    """Rows of one session are its turns in arrival order, each arriving when the trace says."""
    text = "arrival_s,prompt_tokens,output_tokens,session,prefix_id,prefix_tokens\n1,200,10,x,p,50\n0.5,30,3,,,\n0,100,10,x,p,50\n"
    assert read(tmp_path, text) == (
        Request(0, 0, 100, 10, 0, 0, 0, 50),
        Request(1, SECOND // 2, 30, 3),
        Request(2, SECOND, 200, 10, 0, 1, 0, 50),
    )


BAD = [
    (
        HEADER + "a,0,0,,10,1,,\na,2,,1,10,1,,\n",
        "line 3: turn 2 follows the session's turn 0 (line 2): turn 1 is missing",
    ),
    (HEADER + "a,0,0,,10,1,,\na,1,,1,10,1,,\na,0,1,,10,1,,\n", "line 4: turn 0 comes after the session's turn 1"),
    (HEADER + "a,1,,1,10,1,,\n", "line 2: the session's first row is turn 1: turn 0 is missing"),
    (HEADER + "a,0,0,,10,1,,\na,1,,-2,10,1,,\n", "line 3: think_s is negative: a time must be zero or more"),
    (HEADER + "a,0,,,10,1,,\n", "line 2: turn 0 has no arrival_s (or arrival_ms): a session's first turn gives its"),
    (HEADER + "a,0,0,,10,1,,\na,1,,,10,1,,\n", "line 3: turn 1 has no think_s (or think_ms)"),
    (HEADER + "a,0,0,,10,1,,\na,1,3,1,10,1,,\n", "line 3: turn 1 gives arrival_s: a later turn arrives think_s after"),
    (HEADER + "a,0,0,,10,1,p,11\n", "line 2: prefix_tokens exceed the new_prompt_tokens of the session's turn 0"),
    (HEADER + "a,0,0,,10,1,p,\n", "line 2: no prefix_tokens: a shared prefix needs prefix_id and prefix_tokens"),
    (HEADER + "a,0,0,,10,1,p,4\nb,0,0,,10,1,p,5\n", "prefix_tokens differ from those line 2 gives the same prefix_id"),
    (
        HEADER + "a,0,0,,10,1,p,4\na,1,,0,10,1,q,4\n",
        "line 3: the prefix differs from the one the session's turn 0 gives",
    ),
    (
        "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,10,1,p,11\n",
        "line 2: prefix_tokens exceed prompt_tokens",
    ),
    (
        "session,turn,arrival_s,prompt_tokens,output_tokens\na,0,0,10,1\n",
        "turn (a session trace's) beside prompt_tokens",
    ),
    ("arrival_s,prompt_tokens,output_tokens,think_s\n0,10,1,1\n", "think_s (a session trace's) beside prompt_tokens"),
    (HEADER.replace("think_s", "think_s,think_ms") + "a,0,0,,,10,1,,\na,1,,1,1,10,1,,\n", "both think_s and think_ms"),
    (HEADER + "a,x,0,,10,1,,\n", "line 2: turn must be a whole number counting a session's turns from 0"),
    (
        "session,turn,arrival_s,output_tokens\na,0,0,1\n",
        "line 2: no new_prompt_tokens: a session trace has the columns",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[message[:40] for _, message in BAD])
def test_a_bad_session_trace_is_one_clear_message(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match="t.csv") as error:
        read(tmp_path, text)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [
                '{"session": 1, "turn": 0, "arrival_s": 0, "new_prompt_tokens": 5, "output_tokens": 1}',
                '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": 1}',
            ],
            "line 2: prompt_tokens belongs to a plain trace, not a session trace: give one schema, not a mix",
        ),
        (
            [
                '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": 1}',
                '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": 1, "turn": 1}',
            ],
            "line 2: turn belongs to a session trace, not a plain one: give one schema, not a mix",
        ),
        (
            [
                '{"arrival_s": 1, "prompt_tokens": 5, "output_tokens": 1, "session": 1, "prefix_id": 1, "prefix_tokens": 2}',
                '{"arrival_s": 2, "prompt_tokens": 5, "output_tokens": 1, "session": 1}',
            ],
            "line 2: prefix_id differs from the one line 1 gives its session",
        ),
        (
            ['{"session": true, "turn": 0, "arrival_s": 0, "new_prompt_tokens": 5, "output_tokens": 1}'],
            "line 1: session must be an id (text or a whole number) of at most 64 characters",
        ),
    ],
)
def test_a_jsonl_trace_mixing_schemas_row_by_row_is_refused(tmp_path: Path, rows: list[str], message: str) -> None:
    with pytest.raises(InputError, match="t.jsonl") as error:
        read(tmp_path, "\n".join(rows) + "\n", "t.jsonl")
    assert message in str(error.value)
