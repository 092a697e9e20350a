"""The safe readers refuse every way a small file can crash, hang or exhaust the machine (issue 15, item 2): deep
nesting without a RecursionError, anchor bombs before they expand, oversized and non-text files; each refusal
is one :class:`InputError` naming the file, within a second and a few MiB."""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from stratasim.config.study_file import load_study
from stratasim.kernel import safe_load
from stratasim.kernel.errors import ConfigError, InputError
from stratasim.kernel.safe_load import (
    MAX_ALIASES,
    MAX_DEPTH,
    YAML_BYTES,
    check_depth,
    csv_rows,
    parse_json,
    parse_yaml,
    read_bytes,
    read_text,
)


def laughs(levels: int = 9, fan: int = 9, style: str = "list") -> str:
    """A billion-laughs anchor bomb: each anchor holds ``fan`` aliases of the one before (9^9 lols)."""
    lines = ["a0: &a0 lol"]
    for level in range(1, levels + 1):
        items = ", ".join([f"*a{level - 1}"] * fan)
        body = f"[{items}]" if style == "list" else "{" + ", ".join(f"k{i}: *a{level - 1}" for i in range(fan)) + "}"
        lines.append(f"a{level}: &a{level} {body}")
    return "\n".join(lines) + "\n"


BOMBS = {
    "list bomb": laughs(),
    "mapping bomb": laughs(style="map"),
    "bomb in a section": "workload:\n  kind: collective\n" + "".join(f"  {line}\n" for line in laughs().splitlines()),
    "merge-key bomb": "a0: &a0 {x: 1, y: 2}\n"
    + "".join(
        f"a{i}: &a{i} {{k1: *a{i - 1}, k2: *a{i - 1}, k3: *a{i - 1}, k4: *a{i - 1}, k5: *a{i - 1}, k6: *a{i - 1}, "
        f"k7: *a{i - 1}, k8: *a{i - 1}, k9: *a{i - 1}, k10: *a{i - 1}}}\n"
        for i in range(1, 9)
    )
    + "b: {<<: *a8}\n",
    "deep through aliases": "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200)),
    "cycle": "a: &a [1, *a]\n",
    "mapping cycle": "a: &a {b: *a}\n",
    "too many aliases": "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n",
}

DEEP_YAML = {
    "flow lists": "[" * 10_000 + "]" * 10_000,
    "flow mappings": "{a: " * 10_000 + "1" + "}" * 10_000,
    "block lists": "".join(" " * i + "-\n" for i in range(700)),  # under the 256 KiB of YAML
    "block mappings": "".join(" " * i + "a:\n" for i in range(700)),
    "in a key": "? " * 5_000 + "x",
    "mixed": "a: " + "[{b: " * 5_000 + "1" + "}]" * 5_000,
}

DEEP_JSON = {
    "arrays": "[" * 100_000 + "]" * 100_000,
    "objects": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "unclosed": "[" * 1_000_000,
    "in an object": '{"pg": ' + "[" * 10_000 + "]" * 10_000 + "}",
}


def bounded(action: Callable[[], object], seconds: float = 1.0, mib: float = 64) -> InputError:
    """The :class:`InputError` ``action`` raises, checked to come within ``seconds`` (timed alone) and ``mib`` of
    allocations (traced in a second run: tracing slows Python several times)."""
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        action()
    elapsed = time.monotonic() - started
    assert elapsed < seconds, f"took {elapsed:.2f} s"
    tracemalloc.start()
    try:
        with pytest.raises(InputError):
            action()
        peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()
    assert peak < mib, f"allocated {peak:.0f} MiB"
    return caught.value


@pytest.mark.parametrize("text", BOMBS.values(), ids=BOMBS.keys())
def test_anchor_bombs_are_refused_before_they_expand(text: str) -> None:
    error = bounded(lambda: parse_yaml(text, "bomb.yaml"))
    assert error.source == "bomb.yaml" and error.where.startswith("line ")
    assert any(word in error.what for word in ("aliases", "alias refers", "nested deeper")), error.what


@pytest.mark.parametrize("text", DEEP_YAML.values(), ids=DEEP_YAML.keys())
def test_deep_yaml_is_refused_without_recursion(text: str) -> None:
    error = bounded(lambda: parse_yaml(text, "deep.yaml"), seconds=2.0)
    assert error.what == f"invalid YAML: nested deeper than {MAX_DEPTH} levels" and error.where.startswith("line ")


@pytest.mark.parametrize("text", DEEP_JSON.values(), ids=DEEP_JSON.keys())
def test_deep_json_is_refused_without_recursion(text: str) -> None:
    error = bounded(lambda: parse_json(text, "deep.json"))
    assert error.what == f"nested deeper than {MAX_DEPTH} levels" and error.where == "line 1"


def test_the_limits_leave_room_for_real_files() -> None:
    nested = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert parse_yaml(nested, "ok.yaml")["a"] == eval("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))  # noqa: S307
    assert parse_yaml("d: &d {bandwidth: 50GB/s}\ne: [*d, *d]\n", "ok.yaml")["e"] == [{"bandwidth": "50GB/s"}] * 2
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok.json") is not None
    assert parse_json(
        '["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\""]', "s.json"
    )  # in a string
    assert parse_yaml("", "empty.yaml") is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("a: 2024-02-30", "invalid YAML value: day is out of range"),
        ("a: " + "9" * 5_000, "invalid YAML value: Exceeds the limit"),
        ("a: 1\na: 2", "invalid YAML: duplicate key"),
        ("!secret x", "invalid YAML: could not determine a constructor for the tag"),
        ("a: !!python/object/apply:os.system [ls]", "invalid YAML: could not determine a constructor"),
        ("a: [1, 2", "invalid YAML: expected ',' or ']'"),
        ("--- 1\n--- 2\n", "invalid YAML: expected a single document in the stream, but found another"),
        ("a: *nowhere", "invalid YAML: found undefined alias"),
        ("a: 1\nb: \x07", "invalid YAML: character #x0007 is not allowed"),
        ("? [1]\n: 2", "invalid YAML: found unhashable key"),
    ],
)
def test_every_yaml_failure_is_an_input_error(text: str, what: str) -> None:
    error = bounded(lambda: parse_yaml(text, "bad.yaml"))
    assert error.what.startswith(what), error.what


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("[NaN]", "invalid JSON: NaN is not a number JSON allows"),
        ('{"a": -Infinity}', "invalid JSON: -Infinity is not a number JSON allows"),
        ("[1e400]", "invalid JSON: the number 1e400 is beyond a double"),
        ("9" * 5_000, "invalid JSON value: Exceeds the limit"),
        ('{"a": 1,}', "invalid JSON: Expecting property name"),
        ('"\\ud800"x', "invalid JSON: Extra data"),
        ('"' + '\\"' * 1_000_000, "invalid JSON: Unterminated string"),  # the depth scan stays linear
        ('"\\' * 1_000_000, "invalid JSON: Unterminated string"),
        ('"' * 1_000_001, "invalid JSON: Extra data"),
    ],
)
def test_every_json_failure_is_an_input_error(text: str, what: str) -> None:
    assert bounded(lambda: parse_json(text, "bad.json")).what.startswith(what)


def test_json_duplicate_keys_on_request() -> None:
    assert parse_json('{"a": 1, "a": 2}', "d.json") == {"a": 2}
    error = bounded(lambda: parse_json('{"a": 1, "a": 2}', "d.json", unique_keys=True))
    assert (error.where, error.what) == ("", "duplicate key")


def test_check_depth_walks_parsed_values_without_recursion() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert bounded(lambda: check_depth({"a": deep}, "node 4")).what == f"nested deeper than {MAX_DEPTH} levels"
    check_depth({"a": [[1, 2], (3,)]}, "node 4")


def test_csv_failures_name_the_line() -> None:
    error = bounded(lambda: csv_rows('a,b\n1,2\n1,"' + "x" * 200_000 + '"\n', "t.csv"))
    assert (error.where, error.what) == ("line 3", "invalid CSV: field larger than field limit (131072)")
    assert csv_rows("a,b\n\n1,2\n", "t.csv") == [(1, ["a", "b"]), (2, []), (3, ["1", "2"])]


def test_files_above_the_limit_are_refused_without_reading_them(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as file:  # sparse: 1 GiB on disk costs nothing
        file.truncate(1 << 30)
    error = bounded(lambda: read_text(huge, 8 << 20, "study"))
    assert error.what == "the study is 1024 MiB, above the limit of 8 MiB"


def test_yaml_at_its_cap_parses_in_about_a_second_of_cpu() -> None:
    """The most nodes a byte buys (a flow list of one-digit numbers): 131,000 at the cap, about 1 s of CPU with
    libyaml (timed as CPU, not wall: the machine may be shared) and some 50 MiB."""
    dense = "a: [" + "1," * ((YAML_BYTES - 8) // 2) + "1]\n"
    assert len(dense) <= YAML_BYTES
    started = time.process_time()
    assert len(parse_yaml(dense, "big.yaml")["a"]) > 130_000
    assert time.process_time() - started < 3.0
    tracemalloc.start()
    try:
        parse_yaml(dense, "big.yaml")
        assert tracemalloc.get_traced_memory()[1] < 200 << 20
    finally:
        tracemalloc.stop()


def test_yaml_above_its_cap_is_refused_saying_where_bulk_data_belongs(tmp_path: Path) -> None:
    error = bounded(lambda: parse_yaml("# " + "x" * YAML_BYTES, "big.yaml"))
    assert error.what == (
        "the YAML is above the limit of 256 KiB (a study is a few kB; bulk data belongs in trace, CSV or JSON files)"
    )
    study = tmp_path / "big.yaml"
    study.write_text("name: big\nextra: [" + "1, " * (YAML_BYTES // 3) + "1]\n")
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        load_study(study)
    assert time.monotonic() - started < 1.0
    assert caught.value.problems == [("", f"the file is {study.stat().st_size:,} bytes, above the limit of 256 KiB")]


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"name: x\x00\x01\x02", "the study is binary, not text (a NUL byte at offset 7)"),
        (b"\x7fELF\x02\x01\x01\x00\x00", "the study is binary, not text (a NUL byte at offset 7)"),
        (b"name: caf\xe9\n", "the study is not UTF-8 text (invalid byte at offset 9)"),
        (b"\xff\xfe" + "name: x".encode("utf-16-le"), "the study is binary, not text (a NUL byte at offset 3)"),
        (b"\xc3", "the study is not UTF-8 text (invalid byte at offset 0)"),
    ],
)
def test_binary_and_non_utf8_files_are_refused_without_echo(tmp_path: Path, content: bytes, what: str) -> None:
    (tmp_path / "s.yaml").write_bytes(content)
    error = bounded(lambda: read_text(tmp_path / "s.yaml", 1 << 20, "study"))
    assert error.what == what


def test_a_utf8_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_bytes(b"\xef\xbb\xbfname: x\n")
    assert parse_yaml(read_text(tmp_path / "s.yaml", 1 << 20, "study"), "s.yaml") == {"name": "x"}


def test_devices_folders_and_missing_files(tmp_path: Path) -> None:
    assert (
        bounded(lambda: read_bytes("/dev/zero", 1 << 20, "trace")).what
        == "cannot read the trace: it is a device, not a file"
    )
    assert bounded(lambda: read_bytes(tmp_path, 1 << 20, "trace")).what == "cannot read the trace: it is a folder"
    assert bounded(lambda: read_bytes(tmp_path / "nope", 1, "trace")).what == "cannot read the trace: no such file"
    assert bounded(lambda: read_bytes(tmp_path / "nope", 1, "file")).what == "no such file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_is_read_no_further_than_the_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # the writer: more than the limit, then it is killed when the reader stops
        try:
            with open(fifo, "wb") as out:
                out.write(b"x" * (4 << 20))
        finally:
            os._exit(0)
    try:
        started = time.monotonic()
        with pytest.raises(InputError, match="the study is above the limit of 1 MiB"):
            read_bytes(fifo, 1 << 20, "study")
        assert time.monotonic() - started < 1
    finally:
        os.waitpid(pid, 0)


def test_without_libyaml_the_pure_python_loader_gives_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "a: &x [1, {b: 2.5}]\nc: *x\nd: 2024-01-02\n"
    expected = parse_yaml(text, "s.yaml")
    refusals = [parse_or_error(body) for body in (*BOMBS.values(), *DEEP_YAML.values(), "a: 1\na: 2")]
    monkeypatch.setattr(safe_load, "_LIBYAML", False)
    assert parse_yaml(text, "s.yaml") == expected
    assert [parse_or_error(body) for body in (*BOMBS.values(), *DEEP_YAML.values(), "a: 1\na: 2")] == refusals


def parse_or_error(text: str) -> str:
    """What parsing ``text`` says, in short: the kind of refusal, or "ok"."""
    try:
        parse_yaml(text, "s.yaml")
    except InputError as exc:
        return next(
            (said for said in ("aliases", "alias refers", "nested deeper", "duplicate key") if said in exc.what),
            exc.what,
        )
    return "ok"
