"""Sessions in request traces: a session trace (closed loop), and the session and prefix columns of a plain one.

A **session trace** has one row per turn: ``session`` (any id of up to :data:`ID_CHARACTERS` characters), ``turn``
(0, 1, ... in file order within each session; sessions may interleave), ``new_prompt_tokens`` (the tokens the turn
adds: a first turn's whole prompt) and ``output_tokens``; a first turn gives ``arrival_s`` (or ``arrival_ms``), a
later one ``think_s`` (or ``think_ms``): the time from the previous turn's last token to its arrival, known only
as the run goes (closed loop). A turn's prompt is the previous turn's prompt and output and its new tokens.

Either kind of trace may give ``prefix_id`` (any id) and ``prefix_tokens``: the request's prompt (a session's first
turn's) starts with that many tokens shared with every request naming the same id (a system prompt). A session's
later turns may leave them out or repeat them; one id has one length. A plain trace (arrival on every row) may give
``session``: its rows of one session are that session's turns in arrival order, each arriving when the trace says
(open loop).

Sessions are numbered from 0 in order of their first turns' arrivals (ties in file order), prefixes in order of
first appearance. Errors name the file, the line and the key, never what the file holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from stratasim.kernel.errors import InputError
from stratasim.workload_layer.serving.request_config import ARRIVAL_LIMIT_PS, horizon_said
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.trace_numbers import NUMBER_CHARACTERS, picoseconds, tokens
from stratasim.workload_layer.serving.trace_rows import Row

__all__ = ["ID_CHARACTERS", "SESSION_KEYS", "Labels", "is_session_trace", "labelled", "labels", "sessions"]

ID_CHARACTERS = NUMBER_CHARACTERS
"""Most characters of a session's or a prefix's id."""
SESSION_KEYS = ("turn", "new_prompt_tokens", "think_s", "think_ms")
"""The keys only a session trace has."""
PLAIN_KEYS = ("prompt_tokens", "ContextTokens", "GeneratedTokens", "TIMESTAMP")
"""The keys only a plain (or Azure) trace has."""
_ARRIVALS = {"arrival_s": 12, "arrival_ms": 9}
_THINKS = {"think_s": 12, "think_ms": 9}
_EXPECTED = (
    "a session trace has the columns session, turn, arrival_s (or arrival_ms) on first turns, think_s (or "
    "think_ms) on later turns, new_prompt_tokens, output_tokens"
)

Labels = tuple[str, str, int]
"""A plain trace row's session id, prefix id (empty: none) and prefix tokens."""


def _cell(row: dict[str, object], key: str) -> object | None:
    """The row's value at ``key``; None when absent, null or a blank cell."""
    value = row.get(key)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


def _id(source: str, line: int, key: str, value: object) -> str:
    """An id as text: a string or a whole number of at most :data:`ID_CHARACTERS` characters."""
    text = value.strip() if isinstance(value, str) else str(value) if isinstance(value, int) else None
    if isinstance(value, bool) or text is None or len(text) > ID_CHARACTERS:
        raise InputError(
            source,
            f"line {line}",
            f"{key} must be an id (text or a whole number) of at most {ID_CHARACTERS} characters",
        )
    return text


def is_session_trace(source: str, line: int, row: dict[str, object]) -> bool:
    """Whether the first row (a CSV's header) is a session trace's; an error when it mixes both schemas."""
    session = [key for key in SESSION_KEYS if key in row]
    plain = [key for key in PLAIN_KEYS if key in row]
    if session and plain:
        raise InputError(
            source,
            f"line {line}",
            f"{session[0]} (a session trace's) beside {plain[0]} (a plain trace's): give one schema, not a mix",
        )
    return bool(session)


def labels(source: str, line: int, row: dict[str, object]) -> Labels:
    """A plain trace row's session and prefix (module docstring); an error for a session trace's key."""
    mixed = next((key for key in SESSION_KEYS if key in row), None)
    if mixed is not None:
        raise InputError(
            source, f"line {line}", f"{mixed} belongs to a session trace, not a plain one: give one schema, not a mix"
        )
    session = _cell(row, "session")
    prefix, prefix_tokens = _prefix(source, line, row)
    return ("" if session is None else _id(source, line, "session", session)), prefix, prefix_tokens


def _prefix(source: str, line: int, row: dict[str, object]) -> tuple[str, int]:
    """The row's prefix id and tokens (``""``, 0: none); both or neither."""
    given, length = _cell(row, "prefix_id"), _cell(row, "prefix_tokens")
    if (given is None) != (length is None):
        missing = "prefix_tokens" if length is None else "prefix_id"
        raise InputError(source, f"line {line}", f"no {missing}: a shared prefix needs prefix_id and prefix_tokens")
    if given is None:
        return "", 0
    return _id(source, line, "prefix_id", given), tokens(source, line, "prefix_tokens", length)


@dataclass
class _Prefixes:
    """Prefix ids numbered by first appearance, each with its tokens and the line that first gave them."""

    source: str
    known: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    def number(self, line: int, key: str, length: int, prompt: tuple[int, str]) -> int:
        """Prefix ``key``'s number (-1 for none); an error when it is longer than the ``prompt`` (its tokens and
        key) or its length differs from the one given before."""
        if not key:
            return -1
        if length > prompt[0]:
            raise InputError(
                self.source,
                f"line {line}",
                f"prefix_tokens exceed {prompt[1]}: a shared prefix is the start of the prompt",
            )
        number, first, known = self.known.setdefault(key, (len(self.known), line, length))
        if known != length:
            raise InputError(
                self.source,
                f"line {line}",
                f"prefix_tokens differ from those line {first} gives the same prefix_id: one prefix, one length",
            )
        return number


def labelled(source: str, requests: list[tuple[int, int, int, int, Labels]]) -> tuple[Request, ...]:
    """The plain trace's ``requests`` (arrival, line, prompt, output, labels), sorted by arrival, as requests with
    their sessions, turns and prefixes (module docstring)."""
    prefixes = _Prefixes(source)
    numbers: dict[str, tuple[int, int, int, str]] = {}  # session id: its number, last turn, first line, prefix
    built = []
    for index, (arrival, line, prompt, output, (session, prefix, length)) in enumerate(requests):
        shared = prefixes.number(line, prefix, length, (prompt, "prompt_tokens"))
        number, turn = -1, 0
        if session:
            number, last, first, carried = numbers.get(session, (len(numbers), -1, line, prefix))
            if carried != prefix:
                raise InputError(
                    source,
                    f"line {line}",
                    f"prefix_id differs from the one line {first} gives its session: a session has one prefix",
                )
            turn = last + 1
            numbers[session] = (number, turn, first, prefix)
        built.append(Request(index, arrival, prompt, output, number, turn, shared, length if prefix else 0))
    return tuple(built)


@dataclass
class _Turn:
    """A session trace's row: its line, arrival (first turns) or think time (later ones) in ps, new prompt and
    output tokens, prefix id and tokens."""

    line: int
    time_ps: int
    new: int
    output: int
    prefix: str
    prefix_tokens: int


def sessions(source: str, rows: Iterator[Row], stop: int) -> tuple[Request, ...]:
    """The requests of a session trace (module docstring): its first ``stop`` rows, session by session in order
    of their first turns' arrivals."""
    read: dict[str, list[_Turn]] = {}
    for count, (line, row) in enumerate(rows, start=1):
        session, turn = _place(source, line, row)
        turns = read.setdefault(session, [])
        if turn != len(turns):
            _misplaced(source, line, turn, turns)
        turns.append(_turn(source, line, row, turn))
        if count == stop:
            break
    if not read:
        raise InputError(source, "", "the trace holds no request")
    ordered = sorted(read.values(), key=lambda turns: (turns[0].time_ps, turns[0].line))
    last = ordered[-1][0]
    if last.time_ps > ARRIVAL_LIMIT_PS:
        raise InputError(source, f"line {last.line}", f"the first turn's arrival lies beyond {horizon_said()}")
    return _requests(source, ordered)


def _place(source: str, line: int, row: dict[str, object]) -> tuple[str, int]:
    """The row's session id and turn; an error for a plain trace's key (a mix of schemas)."""
    mixed = next((key for key in PLAIN_KEYS if key in row), None)
    if mixed is not None:
        raise InputError(
            source, f"line {line}", f"{mixed} belongs to a plain trace, not a session trace: give one schema, not a mix"
        )
    missing = [key for key in ("session", "turn", "new_prompt_tokens", "output_tokens") if _cell(row, key) is None]
    if missing:
        raise InputError(source, f"line {line}", f"no {missing[0]}: {_EXPECTED}")
    turn = row["turn"]
    text = str(turn).strip() if isinstance(turn, (int, str)) and not isinstance(turn, bool) else ""
    if not (text.isascii() and text.isdigit() and len(text) <= 10):
        raise InputError(source, f"line {line}", "turn must be a whole number counting a session's turns from 0")
    return _id(source, line, "session", row["session"]), int(text)


def _misplaced(source: str, line: int, turn: int, turns: list[_Turn]) -> None:
    """Refuse turn ``turn`` of a session that has ``turns`` so far: out of order, repeated, or after a gap."""
    if not turns:
        raise InputError(
            source,
            f"line {line}",
            f"the session's first row is turn {turn}: turn 0 is missing (a session starts at turn 0, with its arrival)",
        )
    if turn < len(turns):
        raise InputError(
            source,
            f"line {line}",
            f"turn {turn} comes after the session's turn {len(turns) - 1} (line {turns[-1].line}): a session's turns "
            "come in order, each once",
        )
    raise InputError(
        source,
        f"line {line}",
        f"turn {turn} follows the session's turn {len(turns) - 1} (line {turns[-1].line}): turn {len(turns)} is "
        "missing",
    )


def _turn(source: str, line: int, row: dict[str, object], turn: int) -> _Turn:
    """A session trace's row as read: an arrival on a first turn, a think time on a later one."""
    arrival, think = _time_key(source, line, row, _ARRIVALS), _time_key(source, line, row, _THINKS)
    if turn == 0 and arrival is None:
        raise InputError(
            source, f"line {line}", "turn 0 has no arrival_s (or arrival_ms): a session's first turn gives its arrival"
        )
    if turn == 0 and think is not None:
        raise InputError(
            source,
            f"line {line}",
            f"turn 0 gives {think}: a first turn arrives at its arrival_s, thinking applies to later turns",
        )
    if turn and arrival is not None:
        raise InputError(
            source,
            f"line {line}",
            f"turn {turn} gives {arrival}: a later turn arrives think_s after the previous turn's last token",
        )
    if turn and think is None:
        raise InputError(
            source,
            f"line {line}",
            f"turn {turn} has no think_s (or think_ms): the time after the previous turn's last token",
        )
    key = arrival if turn == 0 else think
    assert key is not None
    value = row[key]
    if isinstance(value, (int, float, str)) and str(value).strip().startswith("-"):
        raise InputError(source, f"line {line}", f"{key} is negative: a time must be zero or more")
    prefix, length = _prefix(source, line, row)
    unit = _ARRIVALS.get(key) or _THINKS[key]
    return _Turn(
        line,
        picoseconds(source, line, key, value, unit),
        tokens(source, line, "new_prompt_tokens", row["new_prompt_tokens"]),
        tokens(source, line, "output_tokens", row["output_tokens"]),
        prefix,
        length,
    )


def _time_key(source: str, line: int, row: dict[str, object], keys: dict[str, int]) -> str | None:
    """The one key of ``keys`` the row gives a value (None: none); an error for both."""
    given = [key for key in keys if _cell(row, key) is not None]
    if len(given) > 1:
        raise InputError(source, f"line {line}", f"both {' and '.join(given)}: give one")
    return given[0] if given else None


def _requests(source: str, ordered: list[list[_Turn]]) -> tuple[Request, ...]:
    """The turns of the sessions ``ordered``, each session's consecutive, later turns following the one before."""
    prefixes = _Prefixes(source)
    built: list[Request] = []
    for number, turns in enumerate(ordered):
        first = turns[0]
        first_prompt = (first.new, "the new_prompt_tokens of the session's turn 0, its whole prompt")
        shared = prefixes.number(first.line, first.prefix, first.prefix_tokens, first_prompt)
        for turn, row in enumerate(turns):
            if row.prefix and (row.prefix, row.prefix_tokens) != (first.prefix, first.prefix_tokens):
                raise InputError(
                    source,
                    f"line {row.line}",
                    f"the prefix differs from the one the session's turn 0 gives (line {first.line}): a session has one prefix",
                )
            index = len(built)
            if turn == 0:
                built.append(Request(index, row.time_ps, row.new, row.output, number, 0, shared, first.prefix_tokens))
                continue
            previous = built[-1]
            prompt = previous.prompt_tokens + previous.output_tokens + row.new
            built.append(
                Request(
                    index, -1, prompt, row.output, number, turn, shared, previous.shared_tokens, index - 1, row.time_ps
                )
            )
    return tuple(built)
