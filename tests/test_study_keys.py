"""``stratasim schema``: the JSON Schema accepts every example study and refuses bad ones; the key reference
(docs/reference/study-keys.md) is current and gives every key a meaning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.cli import main
from stratasim.config.json_schema import study_schema
from stratasim.config.key_reference import markdown, undocumented

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[1]


def _is_sweep(path: Path) -> bool:
    """A sweep file (it has a space to search), not a study."""
    return any(line.startswith("space:") for line in path.read_text(encoding="utf-8").splitlines())


STUDIES = sorted(path for path in (REPO / "examples").rglob("*.yaml") if not _is_sweep(path))


@pytest.fixture(scope="module")
def validator() -> Any:
    schema = study_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_there_are_example_studies() -> None:
    assert len(STUDIES) >= 10


@pytest.mark.parametrize("path", STUDIES, ids=lambda path: str(path.relative_to(REPO)))
def test_every_example_study_validates(validator: Any, path: Path) -> None:
    study = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(study)]
    assert not errors


QUICKSTART = {
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "1GiB"},
    "system": {"algorithm": ["ring", "direct"], "splits": 4, "endpoint_delay": "10ns"},
    "network": {"topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "500ns"}]},
    "compute": {"backend": "roofline", "device": {"preset": "h100", "tdp": "700W"}},
}


def _with(path: str, value: object) -> dict[str, Any]:
    study = json.loads(json.dumps(QUICKSTART))
    *parents, last = path.split(".")
    node = study
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return study


def test_the_base_study_is_valid(validator: Any) -> None:
    assert validator.is_valid(QUICKSTART)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("workload.kind", "no_such_kind"),
        ("workload.seq_len", 2048),  # a key of another kind
        ("workload.size", "a lot"),  # not a quantity
        ("workload.size", 1073741824),  # a bare number: no unit
        ("workload.size", "1073741824"),
        ("network.topology.0.latency", 0),
        ("compute.device.tdp", 700),
        ("system.splits", 0),
        ("system.scheduling", "random"),
        ("network.topology.0.kind", "hypercube"),
        ("network.topology.0.bandwidth", True),
        ("network.topology.0.colour", "red"),  # unknown key
        ("compute.device.tdp", [700]),
        ("name", ""),
    ],
)
def test_bad_studies_are_refused(validator: Any, path: str, value: object) -> None:
    assert not validator.is_valid(_with(path, value))


WHOLE_ACCELERATOR = {
    "name": "mine",
    "pe_rows": 16,
    "pe_cols": 16,
    "clock": "1GHz",
    "mac_pj": 0.2,
    "unrolls": {"conv": {"rows": "RCK", "cols": "PK"}},
    "levels": [
        {"name": "registers", "keeps": ["weights"], "words": 4, "read_pj": 0.2, "write_pj": 0.2},
        {"name": "dram", "keeps": ["inputs", "weights", "outputs"], "read_pj": 100, "write_pj": 100},
    ],
}
WHOLE_WAFER = {
    "name": "w",
    "tiles": {"x": 2, "y": 2},
    "cores": {"x": 4, "y": 4},
    "peak": {"fp16": "1TFLOPS"},
    "sram": "1MiB",
    "dram_bandwidth": "1TB/s",
    "link_bandwidth": "1TB/s",
}


@pytest.mark.parametrize(
    "device",
    [
        WHOLE_ACCELERATOR,
        WHOLE_WAFER,
        {"file": "chip.yaml"},
        {"preset": "palm-wafer", "tiles": {"x": 10}},
        {"file": "chip.yaml", "pe_rows": 4},
    ],
)
def test_whole_and_file_descriptions_are_valid(validator: Any, device: dict[str, object]) -> None:
    assert validator.is_valid(_with("compute.device", device))


@pytest.mark.parametrize(
    "device",
    [
        {**WHOLE_ACCELERATOR, "levels": [{"name": "dram", "keeps": ["inputs"]}]},
        {key: value for key, value in WHOLE_WAFER.items() if key != "sram"} | {"tiles": {"x": 2}},
    ],
)
def test_incomplete_whole_descriptions_are_refused(validator: Any, device: dict[str, object]) -> None:
    assert not validator.is_valid(_with("compute.device", device))


def test_a_study_without_network_is_refused(validator: Any) -> None:
    assert not validator.is_valid({"workload": QUICKSTART["workload"]})


def test_every_key_has_a_meaning() -> None:
    assert undocumented() == []


def test_a_key_without_a_meaning_is_caught() -> None:
    schema = study_schema()
    del schema["$defs"]["SystemOptions"]["properties"]["splits"]["description"]
    assert undocumented(schema) == ["system.splits"]


def test_the_key_reference_is_current() -> None:
    committed = (REPO / "docs" / "reference" / "study-keys.md").read_text(encoding="utf-8")
    assert committed == markdown(), (
        "docs/reference/study-keys.md is stale: python -m stratasim.config.key_reference > docs/reference/study-keys.md"
    )


def test_schema_command_writes_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--out", str(tmp_path / "study.schema.json")]) == 0
    assert json.loads((tmp_path / "study.schema.json").read_text()) == study_schema()
    assert capsys.readouterr().out.startswith("wrote ")
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "StrataSim study"


def test_schema_command_names_a_file_it_cannot_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--out", str(tmp_path / "missing" / "study.schema.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing/study.schema.json" in err and "Traceback" not in err
