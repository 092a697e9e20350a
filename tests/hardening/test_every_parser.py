"""Every file StrataSim reads, fed the inputs that crash, hang or exhaust naive parsers: 10,000 levels of nesting,
an anchor bomb, a file above its size limit, binary garbage and invalid UTF-8. Each gives one error of StrataSim's
own naming the file, within a second (issue 15, item 2); the CLI turns it into exit 2 and no traceback."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.compute_layer.profile_table import load_profile
from stratasim.config import load_study
from stratasim.explore.store import read_store
from stratasim.explore.sweep_file import load_sweep
from stratasim.importers.astra import import_astra
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.safe_load import CONFIG_BYTES, TABLE_BYTES, TRACE_BYTES, YAML_BYTES
from stratasim.report.roofline_plot import points_from_report
from stratasim.workload_layer.dataflow.file import load_graph
from stratasim.workload_layer.traces.astra_text import read_astra_text
from stratasim.workload_layer.traces.chakra import read_trace, to_graph
from stratasim.workload_layer.traces.comm_groups import read_comm_groups
from stratasim.workload_layer.traces.convert import read_graphs
from stratasim.workload_layer.transformer.routing_trace import read_routing_trace
from tests.hardening.test_safe_load import laughs

ROOT = Path(__file__).resolve().parents[2]
ASTRA = ROOT / "tests" / "data" / "astra-sim-inputs"
QUICKSTART = (ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8")
DEEP_YAML = "a: " + "[" * 10_000 + "]" * 10_000 + "\n"
DEEP_JSON = '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"
BINARY = bytes(range(256)) * 4
NOT_UTF8 = b"name: caf\xe9 \xff\xfe\n"


def included(tmp: Path, name: str) -> Path:
    """A study in ``tmp/study`` naming ``tmp/<name>`` as its device file (one outside its folder)."""
    (tmp / "study").mkdir(exist_ok=True)
    study = QUICKSTART.replace("device: h100", f"device: {{file: ../{name}}}")
    (tmp / "study" / "s.yaml").write_text(study, encoding="utf-8")
    return tmp / "study" / "s.yaml"


def graph_study(tmp: Path, name: str) -> Path:
    (tmp / "study").mkdir(exist_ok=True)
    start = QUICKSTART.index("  topology:")
    end = QUICKSTART.index("compute:")
    study = QUICKSTART[:start] + f"  topology: {{kind: graph, file: ../{name}}}\n" + QUICKSTART[end:]
    (tmp / "study" / "g.yaml").write_text(study, encoding="utf-8")
    return tmp / "study" / "g.yaml"


def sweep_base(tmp: Path, name: str) -> Path:
    sweep = f"base: {name}\nspace: {{system.splits: [1, 2]}}\nobjectives: [{{metric: total_time_ns, goal: min}}]\n"
    (tmp / "sweep.yaml").write_text(sweep, encoding="utf-8")
    return tmp / "sweep.yaml"


def astra_system(tmp: Path, name: str) -> None:
    import_astra(ASTRA / "network" / "Ring_4npus.yml", tmp / name)


def astra_network(tmp: Path, name: str) -> None:
    import_astra(tmp / name, ASTRA / "system" / "Ring_4chunks.json")


def trace_records(tmp: Path, name: str) -> None:
    """A trace whose process-group records (a string inside a node) are the file's text."""
    values = (tmp / name).read_bytes().decode("utf-8", errors="replace")
    node = et.Node(id=4, name="## process_group:init ##", type=et.METADATA_NODE, inputs=et.IOInfo(values=values))
    to_graph([node], 0, 2, "x.0.et")


def results_store(tmp: Path, name: str) -> None:
    """A results store whose params column holds the file's text."""
    db = tmp / "store.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE sweep (id INTEGER PRIMARY KEY, definition TEXT)")
        connection.execute(
            "CREATE TABLE trials (number INTEGER, key TEXT, params TEXT, status TEXT, metrics TEXT, "
            "error TEXT, wall_seconds REAL, fidelity INTEGER)"
        )
        connection.execute("INSERT INTO sweep VALUES (1, '{}')")
        text = (tmp / name).read_bytes().decode("utf-8", errors="replace")
        connection.execute("INSERT INTO trials VALUES (0, 'k', ?, 'ok', '{}', '', 1.0, 0)", (text,))
    connection.close()
    read_store(db)


@dataclass(frozen=True)
class Parser:
    """How a test feeds a file named ``name`` in ``tmp`` to one parser; ``kind`` says what inputs make sense."""

    name: str
    suffix: str
    kind: str  # yaml, json, csv, text or binary
    limit: int
    read: Callable[[Path, str], object]


PARSERS = [
    Parser("study", ".yaml", "yaml", YAML_BYTES, lambda tmp, name: load_study(tmp / name)),
    Parser(
        "--set",
        ".txt",
        "yaml",
        0,
        lambda tmp, name: load_study(
            ROOT / "examples" / "quickstart.yaml", [f"system.splits={(tmp / name).read_text('utf-8', 'replace')}"]
        ),
    ),
    Parser("device file", ".yaml", "yaml", YAML_BYTES, lambda tmp, name: load_study(included(tmp, name))),
    Parser("graph file", ".yaml", "yaml", YAML_BYTES, lambda tmp, name: load_study(graph_study(tmp, name))),
    Parser("sweep", ".yaml", "yaml", YAML_BYTES, lambda tmp, name: load_sweep(tmp / name)),
    Parser("sweep base", ".yaml", "yaml", YAML_BYTES, lambda tmp, name: load_sweep(sweep_base(tmp, name))),
    Parser("ASTRA-sim system", ".json", "json", CONFIG_BYTES, astra_system),
    Parser("ASTRA-sim network", ".yml", "yaml", YAML_BYTES, astra_network),
    Parser("ASTRA-sim text workload", ".txt", "text", TABLE_BYTES, lambda tmp, name: read_astra_text(tmp / name)),
    Parser("comm groups", ".json", "json", CONFIG_BYTES, lambda tmp, name: read_comm_groups(tmp / name)),
    Parser("dataflow graph", ".yaml", "yaml", CONFIG_BYTES, lambda tmp, name: load_graph(tmp / name)),
    Parser("dataflow graph JSON", ".json", "json", CONFIG_BYTES, lambda tmp, name: load_graph(tmp / name)),
    Parser("trace process groups", ".json", "json", 0, trace_records),
    Parser("profile CSV", ".csv", "csv", TABLE_BYTES, lambda tmp, name: load_profile(tmp / name)),
    Parser("routing trace", ".csv", "csv", TABLE_BYTES, lambda tmp, name: read_routing_trace(str(tmp / name), 4, 8)),
    Parser("profile JSON", ".json", "json", TABLE_BYTES, lambda tmp, name: load_profile(tmp / name)),
    Parser("report", ".json", "json", TABLE_BYTES, lambda tmp, name: points_from_report(tmp / name)),
    Parser("results store", ".json", "json", 0, results_store),
    Parser("Chakra trace", ".0.et", "binary", TRACE_BYTES, lambda tmp, name: read_trace(tmp / name)),
    Parser(
        "StrataSim trace",
        ".0.pb",
        "binary",
        TRACE_BYTES,
        lambda tmp, name: read_graphs(tmp / name.removesuffix(".0.pb")),
    ),
]


def nested_groups(levels: int) -> bytes:
    """A length-delimited record of ``levels`` nested protobuf groups (field 50): protobuf's own depth test."""
    payload = bytes([0x93, 0x03]) * levels + bytes([0x94, 0x03]) * levels
    length = bytearray()
    value = len(payload)
    while value > 0x7F:
        length.append(value & 0x7F | 0x80)
        value >>= 7
    length.append(value)
    return bytes(length) + payload


def bad_inputs(parser: Parser) -> dict[str, bytes | int]:
    """The inputs worth feeding ``parser``: contents, or a size for a sparse file above its limit."""
    cases: dict[str, bytes | int] = {"binary": BINARY}
    if parser.kind == "binary":
        cases |= {"deep": nested_groups(10_000), "bomb": nested_groups(101) * 1000}
    else:
        cases["not UTF-8"] = NOT_UTF8
        cases["deep"] = (DEEP_JSON if parser.kind == "json" else DEEP_YAML).encode()
        if parser.kind == "yaml":
            cases["bomb"] = laughs().encode()
    if parser.limit:
        cases["huge"] = parser.limit + 1
    return cases


CASES = [
    pytest.param(parser, case, content, id=f"{parser.name}-{case}")
    for parser in PARSERS
    for case, content in bad_inputs(parser).items()
]


@pytest.mark.parametrize(("parser", "case", "content"), CASES)
def test_bad_input_is_one_error_naming_the_file(
    tmp_path: Path, parser: Parser, case: str, content: bytes | int
) -> None:
    name = f"input{parser.suffix}"
    if isinstance(content, int):
        with open(tmp_path / name, "wb") as file:
            file.truncate(content)  # sparse: nothing is written
    else:
        (tmp_path / name).write_bytes(content)
    started = time.monotonic()
    with pytest.raises(StrataSimError) as caught:
        parser.read(tmp_path, name)
    assert time.monotonic() - started < 2.0
    message = str(caught.value)
    assert "Traceback" not in message and "RecursionError" not in message
    if parser.name not in ("--set", "trace process groups", "results store"):  # those name the key, node or store
        assert name in message, message
    if case == "huge":
        assert "above the limit" in message
    if parser.name in ("device file", "graph file", "comm groups", "profile CSV", "profile JSON", "routing trace"):
        assert "caf" not in message and "\\x" not in message  # nothing of the file is echoed


@pytest.mark.parametrize(
    ("args", "content"),
    [
        (["check", "{file}"], DEEP_YAML.encode()),
        (["check", "{file}"], laughs().encode()),
        (["run", "{file}"], BINARY),
        (["check", "{file}"], NOT_UTF8),
        (["sweep", "{file}", "--db", "{db}"], laughs().encode()),
        (
            ["import", "astra", "--network", str(ASTRA / "network" / "Ring_4npus.yml"), "--system", "{file}"],
            DEEP_JSON.encode(),
        ),
        (["trace", "inspect", "{prefix}"], nested_groups(10_000)),
        (["check", "{study}", "--set", "system.splits=" + "[" * 10_000], b""),
    ],
    ids=[
        "deep study",
        "bomb study",
        "binary study",
        "non-UTF-8 study",
        "bomb sweep",
        "deep ASTRA system",
        "deep trace",
        "deep --set",
    ],
)
def test_the_cli_says_it_in_one_error_with_exit_2(tmp_path: Path, args: list[str], content: bytes) -> None:
    file = tmp_path / "input.0.et" if "inspect" in args else tmp_path / "input.yaml"
    file.write_bytes(content)
    shutil.copy(ROOT / "examples" / "quickstart.yaml", tmp_path / "q.yaml")
    argv = [
        arg.format(file=file, db=tmp_path / "s.db", prefix=tmp_path / "input", study=tmp_path / "q.yaml")
        for arg in args
    ]
    done = subprocess.run([sys.executable, "-m", "stratasim", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    first = done.stderr.splitlines()[0]
    assert str(tmp_path / ("q.yaml" if "--set" in args else "input")) in first, done.stderr
