"""Fuzzing the parsers of user files (issue 15, item 6, for items 2 and 5): whatever the text, only StrataSim's own
errors escape — never a RecursionError, a YAML or JSON exception, a UnicodeDecodeError or a ValueError.

CI runs each with a small fixed budget (derandomized, so a failure repeats); ``pytest -m fuzz`` runs the long
budget as well (``STRATASIM_FUZZ_EXAMPLES``, default 20,000 examples per parser).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from stratasim.config import load_study
from stratasim.importers.astra import import_astra
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.safe_load import parse_json, parse_yaml
from stratasim.workload_layer.dataflow.file import load_graph, parse_graph
from stratasim.workload_layer.traces.astra_text import read_astra_text
from stratasim.workload_layer.traces.comm_groups import read_comm_groups
from tests.hardening.budgets import ci_budget, long_budget

ROOT = Path(__file__).resolve().parents[2]
ASTRA = ROOT / "tests" / "data" / "astra-sim-inputs"
QUICKSTART = (ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8")
TEXT_WORKLOAD = ASTRA / "workload" / "Resnet50_DataParallel.txt"

CI = ci_budget(200)
LONG = long_budget(20_000)

YAML_BITS = st.sampled_from(
    [
        "[",
        "]",
        "{",
        "}",
        ":",
        ": ",
        "- ",
        "\n",
        "  ",
        "&a ",
        "*a",
        "<<: ",
        "!!",
        "? ",
        "#",
        "'",
        '"',
        "|",
        ">",
        ",",
        "---",
        "...",
        "%YAML 1.1",
        "!!binary",
        "!!timestamp ",
        "2024-02-30",
        ".inf",
        ".nan",
        "1e400",
        "0x",
        "0o",
        "~",
        "null",
        "true",
        "9" * 30,
        "\t",
        "\x00",
        "\x85",
        "\ufeff",
        "\ud7ff",
        "é",
        "workload",
        "kind",
        "size",
        "1GiB",
        "system",
        "network",
        "topology",
        "compute",
        "device",
        "file",
        "bandwidth",
        "50GB/s",
    ]
)
YAMLISH = st.lists(st.one_of(YAML_BITS, st.text(max_size=8)), max_size=60).map("".join)
JSON_BITS = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        '"',
        "\\",
        "NaN",
        "Infinity",
        "-",
        "1e400",
        "true",
        "null",
        "0",
        '"1"',
        '"a"',
        " ",
        "\n",
        "\\ud800",
        "9" * 30,
    ]
)
JSONISH = st.lists(st.one_of(JSON_BITS, st.text(max_size=6)), max_size=60).map("".join)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["50GB/s", "1us", "ring", "h100", "1GiB", "analytical", "all_reduce"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=20,
)
TEXT_LINES = st.sampled_from(
    [
        "DATA",
        "MODEL",
        "HYBRID_DLRM",
        "MICRO",
        "1",
        "2",
        "-1",
        "99999999999999999999",
        "1e400",
        "nan",
        "conv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 6422528 10",
        "ALLGATHER",
        "NONE",
        "\t",
        " ",
        "é",
        "\x00",
    ]
)


def expect_only_our_errors(action: Callable[[], object]) -> None:
    with contextlib.suppress(StrataSimError):
        action()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def write(folder: Path, name: str, data: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


def fuzz_study_text(folder: Path, text: str) -> None:
    expect_only_our_errors(lambda: load_study(write(folder, "study.yaml", text)))


def fuzz_study_sections(folder: Path, section: str, value: object) -> None:
    study = yaml.safe_load(QUICKSTART)
    study[section] = value
    text = yaml.safe_dump(study, allow_unicode=True)
    expect_only_our_errors(lambda: load_study(write(folder, "study.yaml", text)))


def fuzz_set(value: str) -> None:
    expect_only_our_errors(lambda: load_study(ROOT / "examples" / "quickstart.yaml", [f"system.splits={value}"]))


def fuzz_astra_system(folder: Path, text: str) -> None:
    expect_only_our_errors(lambda: import_astra(ASTRA / "network" / "Ring_4npus.yml", write(folder, "s.json", text)))


def fuzz_astra_network(folder: Path, text: str) -> None:
    expect_only_our_errors(lambda: import_astra(write(folder, "n.yml", text), ASTRA / "system" / "Ring_4chunks.json"))


def fuzz_astra_text(folder: Path, lines: list[str]) -> None:
    expect_only_our_errors(lambda: read_astra_text(write(folder, "w.txt", "\n".join(lines))))


def fuzz_comm_groups(folder: Path, text: str) -> None:
    expect_only_our_errors(lambda: read_comm_groups(write(folder, "g.json", text)))


def fuzz_dataflow_graph(folder: Path, text: str, value: object) -> None:
    expect_only_our_errors(lambda: load_graph(write(folder, "graph.yaml", text)))
    expect_only_our_errors(lambda: parse_graph(value, "graph.yaml"))


def fuzz_loaders(yaml_text: str, json_text: str) -> None:
    expect_only_our_errors(lambda: parse_yaml(yaml_text, "f.yaml"))
    expect_only_our_errors(lambda: parse_json(json_text, "f.json"))


STUDY_SECTIONS = st.sampled_from(["workload", "system", "network", "compute", "name", "extra"])
STRUCTURED_SYSTEM = st.fixed_dictionaries(
    {}, optional={"splits": VALUES, "active_chunks": VALUES, "scheduling": VALUES, "endpoint_delay": VALUES}
)
ASTRA_SYSTEM = st.one_of(
    JSONISH,
    st.dictionaries(
        st.sampled_from(
            [
                "scheduling-policy",
                "endpoint-delay",
                "active-chunks-per-dimension",
                "preferred-dataset-splits",
                "all-reduce-implementation",
                "collective-optimization",
                "local-mem-bw",
                "x",
            ]
        ),
        VALUES,
        max_size=6,
    ).map(lambda data: yaml.safe_dump(data, default_flow_style=True)),
)  # flow YAML is JSON-ish
ASTRA_NETWORK = st.one_of(
    YAMLISH,
    st.dictionaries(st.sampled_from(["topology", "npus_count", "bandwidth", "latency", "x"]), VALUES, max_size=5).map(
        yaml.safe_dump
    ),
)
TEXT_WORKLOADS = st.lists(st.lists(st.one_of(TEXT_LINES, st.text(max_size=6)), max_size=12).map(" ".join), max_size=6)


@CI
@given(YAMLISH)
def test_study_text(folder: Path, text: str) -> None:
    fuzz_study_text(folder, text)


@CI
@given(STUDY_SECTIONS, st.one_of(VALUES, STRUCTURED_SYSTEM))
def test_study_sections(folder: Path, section: str, value: object) -> None:
    fuzz_study_sections(folder, section, value)


@CI
@given(YAMLISH)
def test_set_values(value: str) -> None:
    fuzz_set(value)


@CI
@given(ASTRA_SYSTEM)
def test_astra_system(folder: Path, text: str) -> None:
    fuzz_astra_system(folder, text)


@CI
@given(ASTRA_NETWORK)
def test_astra_network(folder: Path, text: str) -> None:
    fuzz_astra_network(folder, text)


@CI
@given(TEXT_WORKLOADS)
def test_astra_text(folder: Path, lines: list[str]) -> None:
    fuzz_astra_text(folder, lines)


@CI
@given(st.one_of(JSONISH, VALUES.map(lambda value: yaml.safe_dump(value, default_flow_style=True))))
def test_comm_groups(folder: Path, text: str) -> None:
    fuzz_comm_groups(folder, text)


DATAFLOW_KEYS = st.sampled_from(
    ["name", "kind", "m", "k", "n", "batch", "weights", "elements", "inputs", "flops_per_element", "function",
     "queries", "keys", "head_dim", "causal", "group", "lookups", "dim", "rows", "schemes", "weight_bytes", "dtype",
     "from", "to", "bytes", "slot", "flops", "output", "divides", "x"]
)  # fmt: skip
DATAFLOW_VALUES = st.one_of(VALUES, st.sampled_from(["gemm", "elementwise", "attention", "embedding", "a", "b", 1, 8]))
DATAFLOW_GRAPHS = st.fixed_dictionaries(
    {},
    optional={
        "kernels": st.lists(st.dictionaries(DATAFLOW_KEYS, DATAFLOW_VALUES, max_size=8), max_size=4),
        "tensors": st.lists(st.dictionaries(DATAFLOW_KEYS, DATAFLOW_VALUES, max_size=5), max_size=4),
        "repeat": VALUES,
        "training": VALUES,
        "dtype": VALUES,
    },
)


@CI
@given(YAMLISH, st.one_of(VALUES, DATAFLOW_GRAPHS))
def test_dataflow_graph(folder: Path, text: str, value: object) -> None:
    fuzz_dataflow_graph(folder, text, value)


@CI
@given(YAMLISH, JSONISH)
def test_loaders(yaml_text: str, json_text: str) -> None:
    fuzz_loaders(yaml_text, json_text)


@pytest.mark.fuzz
@LONG
@given(
    YAMLISH, STUDY_SECTIONS, st.one_of(VALUES, STRUCTURED_SYSTEM), ASTRA_SYSTEM, ASTRA_NETWORK, TEXT_WORKLOADS, JSONISH
)
def test_long_budget(
    folder: Path, text: str, section: str, value: object, system: str, network: str, lines: list[str], groups: str
) -> None:
    """Every parser above, with the long budget (``pytest -m fuzz``)."""
    fuzz_study_text(folder, text)
    fuzz_study_sections(folder, section, value)
    fuzz_set(text)
    fuzz_astra_system(folder, system)
    fuzz_astra_network(folder, network)
    fuzz_astra_text(folder, lines)
    fuzz_comm_groups(folder, groups)
    fuzz_loaders(text, groups)
