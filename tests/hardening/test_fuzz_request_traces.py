"""Fuzzing the request-trace reader (issue 27): CSV, JSONL and Azure's format, and session traces (issue 30), built
from pieces of valid and hostile rows. Whatever the text, only StrataSim's own errors escape, and a trace read is
within range: arrivals sorted from 0 to the horizon, token counts from 1 to 2^31, never more requests than asked
for; a later turn follows the turn before it, its arrival unknown (-1), its prefix its session's.

CI runs each form with a small fixed budget (derandomized); ``pytest -m fuzz`` runs ``STRATASIM_FUZZ_EXAMPLES`` (by
default 10,000) each.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from stratasim.kernel.errors import StrataSimError
from stratasim.workload_layer.serving.request_config import ARRIVAL_LIMIT_PS
from stratasim.workload_layer.serving.trace_file import MAX_TOKENS, read_trace
from tests.hardening.budgets import ci_budget, long_budget

CI = ci_budget(150, also=(HealthCheck.function_scoped_fixture,))
LONG = long_budget(also=(HealthCheck.function_scoped_fixture,))

HOSTILE = st.sampled_from(
    ["0", "0.5", ".5", "5.", "1e3", "1E-3", "-1", "1e19", "4611686", "4611687", "9" * 40, "1" * 5000, "nan", ""]
    + ["inf", "1e999999", "1e-999999", "0x10", " 7 ", "²", "1_000", "007", "1.2.3", "e5", "+1", "2147483648"]
)
NUMBERS = st.one_of(st.integers(min_value=1, max_value=5000).map(str), st.floats(0, 1e6).map(repr), HOSTILE)
NOISE = st.sampled_from(["\n", "\r\n", ",", '"', "\x00", "é", "\ufeff", "\\", "{", "}", "[", ":", " ", "\t", "\xff"])
AZURE_TIMES = st.sampled_from(
    ["2023-11-16 18:15:46.6474004", "2023-11-16 18:15:47", "2023-11-16 18:16:00.1", "2023-11-17 01:00:00.25"]
    + ["2023-11-16 18:15:46.6474004", "2023-11-16T18:15:46Z", "2023-11-16 18:15:46+05:30", "2024-02-30 00:00:00"]
    + ["2023-11-16 25:00:00", "2023-11-16 18:15:46." + "9" * 40, "0000-01-01 00:00:00", "9999-12-31 23:59:59"]
    + ["2023-01-01 00:00:00", "2023-06-01 00:00:00", "２０２３-11-16 18:15:46", "2023-11-16 18:15:46-24:00"]
)
CSV_HEADERS = st.sampled_from(
    ["arrival_s,prompt_tokens,output_tokens", "arrival_ms,prompt_tokens,output_tokens", "arrival_s,arrival_ms"]
    + ["TIMESTAMP,ContextTokens,GeneratedTokens", "prompt_tokens,output_tokens,arrival_s,extra", "", "a,b,c"]
)
KEYS = st.sampled_from(
    ["arrival_s", "arrival_ms", "prompt_tokens", "output_tokens", "TIMESTAMP", "ContextTokens", "GeneratedTokens"]
)
JSON_VALUES = st.one_of(
    st.integers(min_value=1, max_value=5000).map(str),
    NUMBERS.map(lambda text: text if text.lstrip("-").replace(".", "", 1).isdigit() else f'"{text}"'),
    AZURE_TIMES.map(lambda text: f'"{text}"'),
    st.sampled_from(["true", "null", "[]", "{}", "1.5e308", "1e400", "-0.0", "NaN", "1" * 4400, '"x"']),
)


def _csv(header: str, rows: list[list[str]], noise: list[str]) -> str:
    lines = [header, *(",".join(row) for row in rows)]
    for place, bit in enumerate(noise):
        index = 1 + place * 7 % len(lines)  # after the header, which a CSV needs
        lines.insert(index, bit)
    return "\n".join(lines) + "\n"


CSV_TEXTS = st.builds(
    _csv,
    CSV_HEADERS,
    st.lists(
        st.one_of(st.lists(NUMBERS, min_size=3, max_size=3), st.lists(NUMBERS, max_size=4)), min_size=1, max_size=8
    ),
    st.lists(NOISE, max_size=2),
)
AZURE_TEXTS = st.builds(
    _csv,
    st.just("TIMESTAMP,ContextTokens,GeneratedTokens"),
    st.lists(st.tuples(AZURE_TIMES, NUMBERS, NUMBERS).map(list), min_size=1, max_size=8),
    st.lists(NOISE, max_size=2),
)
PLAIN_ROWS = st.fixed_dictionaries(
    {"arrival_s": JSON_VALUES, "prompt_tokens": JSON_VALUES, "output_tokens": JSON_VALUES},
    optional={"arrival_ms": JSON_VALUES, "extra": JSON_VALUES},
)
AZURE_ROWS = st.fixed_dictionaries(
    {"TIMESTAMP": JSON_VALUES, "ContextTokens": JSON_VALUES, "GeneratedTokens": JSON_VALUES},
    optional={"arrival_s": JSON_VALUES},
)
JSON_ROWS = st.one_of(PLAIN_ROWS, AZURE_ROWS, st.dictionaries(KEYS, JSON_VALUES, max_size=5)).map(
    lambda row: "{" + ", ".join(f'"{key}": {value}' for key, value in row.items()) + "}"
)
JSONL_TEXTS = st.builds(
    _csv, st.just(""), st.lists(JSON_ROWS.map(lambda row: [row]), min_size=1, max_size=8), st.lists(NOISE, max_size=2)
)
SESSION_HEADERS = st.sampled_from(
    [
        "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens",
        "session,turn,arrival_ms,think_ms,new_prompt_tokens,output_tokens",
    ]
    + [
        "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens,prefix_id,prefix_tokens",
        "session,turn,prompt_tokens,think_s",
    ]
    + [
        "arrival_s,prompt_tokens,output_tokens,session,prefix_id,prefix_tokens",
        "arrival_s,prompt_tokens,output_tokens,turn",
    ]
)
SESSION_CELLS = st.one_of(NUMBERS, st.sampled_from(["", "a", "b", "0", "1", "2", "-0", "-3"]))
SESSION_TEXTS = st.builds(
    _csv,
    SESSION_HEADERS,
    st.lists(st.lists(SESSION_CELLS, min_size=6, max_size=8), min_size=1, max_size=8),
    st.lists(NOISE, max_size=2),
)
LIMITS = st.one_of(st.none(), st.integers(min_value=1, max_value=4))


def _case(tmp_path: Path, name: str, text: str, limit: int | None, most: int | None) -> None:
    trace = tmp_path / name
    trace.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    with contextlib.suppress(StrataSimError):
        requests = read_trace(trace, limit, most)
        assert len(requests) <= min(limit or 10**9, (most if most is not None else 10**9) + 1)
        arrivals = [request.arrival_ps for request in requests if request.follows < 0]
        assert arrivals == sorted(arrivals)
        for request in requests:
            if request.follows >= 0:
                before = requests[request.follows]
                assert request.follows == request.index - 1 and request.arrival_ps == -1 and request.think_ps >= 0
                assert (before.session, before.turn + 1) == (request.session, request.turn)
                assert (before.shared_prefix, before.shared_tokens) == (request.shared_prefix, request.shared_tokens)
            assert 0 <= request.shared_tokens <= request.prompt_tokens
        assert all(0 <= arrival <= ARRIVAL_LIMIT_PS for arrival in arrivals)
        assert all(1 <= r.prompt_tokens <= MAX_TOKENS and 1 <= r.output_tokens <= MAX_TOKENS for r in requests)


@CI
@given(text=CSV_TEXTS, limit=LIMITS, most=LIMITS)
def test_csv_traces(tmp_path: Path, text: str, limit: int | None, most: int | None) -> None:
    _case(tmp_path, "trace.csv", text, limit, most)


@CI
@given(text=AZURE_TEXTS, limit=LIMITS, most=LIMITS)
def test_azure_traces(tmp_path: Path, text: str, limit: int | None, most: int | None) -> None:
    _case(tmp_path, "azure.csv", text, limit, most)


@CI
@given(text=JSONL_TEXTS, limit=LIMITS, most=LIMITS)
def test_jsonl_traces(tmp_path: Path, text: str, limit: int | None, most: int | None) -> None:
    _case(tmp_path, "trace.jsonl", text, limit, most)


@CI
@given(text=SESSION_TEXTS, limit=LIMITS, most=LIMITS)
def test_session_traces(tmp_path: Path, text: str, limit: int | None, most: int | None) -> None:
    _case(tmp_path, "sessions.csv", text, limit, most)


@pytest.mark.fuzz
@LONG
@given(csv=CSV_TEXTS, azure=AZURE_TEXTS, jsonl=JSONL_TEXTS, sessions=SESSION_TEXTS, limit=LIMITS, most=LIMITS)
def test_long_budget(
    tmp_path: Path, csv: str, azure: str, jsonl: str, sessions: str, limit: int | None, most: int | None
) -> None:
    _case(tmp_path, "trace.csv", csv, limit, most)
    _case(tmp_path, "sessions.csv", sessions, limit, most)
    _case(tmp_path, "azure.csv", azure, limit, most)
    _case(tmp_path, "trace.jsonl", jsonl, limit, most)
