"""The study schema: every problem named by its dotted path, all at once; frozen results; conversions."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from stratasim.config.study_file import Study, load_study, parse_study
from stratasim.kernel.errors import ConfigError
from stratasim.system_layer.options import Scheduling, SystemOptions
from stratasim.v1 import network_pb2

GOOD: dict[str, Any] = {
    "name": "tiny",
    "workload": {"kind": "fake", "size": "1MiB"},
    "system": {"algorithm": "ring", "splits": 4, "endpoint_delay": "10ns"},
    "network": {
        "topology": [
            {"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "500ns"},
            {"kind": "switch", "size": 4, "bandwidth": "25GB/s", "latency": "1us"},
        ]
    },
    "compute": {"device": "h100"},
}


def study(**changes: Any) -> dict[str, Any]:
    """A copy of GOOD with top-level sections replaced or merged (one level deep; a None value deletes a key)."""
    data = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
            data[key] = {k: v for k, v in data[key].items() if v is not None}
        else:
            data[key] = value
    return data


def problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_study(data, "study.yaml")
    return dict(info.value.problems)


def test_good_study_is_typed_and_converted() -> None:
    s = parse_study(study(), "study.yaml")
    assert s.name == "tiny" and s.npus == 32
    assert s.workload.kind == "fake" and s.workload.config.size == 2**20  # type: ignore[attr-defined]
    topology = s.topology_proto()
    assert [d.kind for d in topology.dimensions] == [network_pb2.Dimension.RING, network_pb2.Dimension.SWITCH]
    assert topology.dimensions[0].bandwidth_bytes_per_s == 50e9 and topology.dimensions[1].latency_ps == 10**6
    options = s.system  # the system layer's own options, no copy
    assert isinstance(options, SystemOptions)
    assert options.algorithm == {"*": ("ring",)} and options.splits == 4 and options.endpoint_delay == 10_000
    assert options.scheduling is Scheduling.LIFO and options.algorithm_for("all_reduce", 1) == "ring"
    assert s.compute is not None and s.compute.backend == "roofline" and s.network.backend == "analytical"


def test_defaults_and_name_from_file_stem() -> None:
    data = study()
    del data["name"], data["system"], data["compute"]
    s = parse_study(data, "dir/my_study.yaml")
    assert s.name == "my_study" and s.compute is None
    options = s.system
    assert (options.splits, options.active_chunks, options.endpoint_delay) == (1, 1, 0)


@pytest.mark.parametrize(
    ("algorithm", "expected"),
    [
        ("direct", {"*": ("direct",)}),
        (["ring", "direct"], {"*": ("ring", "direct")}),
        (
            {"all_reduce": ["ring", "direct"], "all_to_all": "direct"},
            {"all_reduce": ("ring", "direct"), "all_to_all": ("direct",)},
        ),
    ],
)
def test_algorithm_forms_are_normalised(algorithm: object, expected: dict[str, tuple[str, ...]]) -> None:
    assert parse_study(study(system={"algorithm": algorithm}), "s").system.algorithm == expected


def test_sections_are_frozen() -> None:
    s = parse_study(study(), "s")
    with pytest.raises(pydantic.ValidationError):
        s.system.splits = 2  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        s.network.topology[0].size = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        s.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "path", "fragment"),
    [
        ({"colour": "red"}, "colour", "unknown key"),
        ({"system": {"split": 4}}, "system.split", "did you mean 'splits'"),
        ({"workload": {"kind": "fake", "size": "1MiB", "sise": 1}}, "workload.sise", "did you mean 'size'"),
        ({"compute": {"device": "h100", "gpu": 1}}, "compute.gpu", "unknown key"),
        ({"system": {"splits": 0}}, "system.splits", "greater than or equal to 1"),
        ({"system": {"algorithm": "rign"}}, "system.algorithm", "unknown algorithm 'rign'"),
        ({"system": {"algorithm": {"allreduce": "ring"}}}, "system.algorithm", "unknown collective 'allreduce'"),
        ({"system": {"algorithm": ["ring", "ring", "ring"]}}, "system.algorithm", "3 algorithms given for 2"),
        ({"system": {"scheduling": "random"}}, "system.scheduling", "'lifo' or 'fifo'"),
        ({"system": {"preset": "astra"}}, "system.preset", "'default' or 'astra_compat'"),
        ({"system": {"local_mem_bw": "0GB/s"}}, "system.local_mem_bw", "positive"),
        ({"system": {"collective_optimization": "fast"}}, "system.collective_optimization", "'local_bw_aware'"),
        ({"system": {"logical_topology": [3, 5]}}, "system.logical_topology", "holds 15 NPUs but network.topology"),
        ({"system": {"queues_per_dim": 0}}, "system.queues_per_dim", "greater than or equal to 1"),
        ({"system": {"reduction": "compute"}, "compute": None}, "system.reduction", "add a compute section"),
        ({"system": {"reduction_dtype": "fp13"}}, "system.reduction_dtype", "fp13"),
        ({"workload": {"kind": "nope"}}, "workload.kind", "available: "),
        ({"workload": {"kind": None}}, "workload.kind", "required"),
        ({"workload": {"kind": "fake", "size": "1 parsec"}}, "workload.size", "unknown size unit"),
        ({"network": {"backend": "warp"}}, "network.backend", "no network backend named 'warp'"),
        ({"network": {"topology": []}}, "network.topology", "at least 1 item"),
        ({"network": {"spawn": True, "endpoint": "127.0.0.1:5000"}}, "network", "mutually exclusive"),
        ({"network": {"endpoint": "localhost"}}, "network.endpoint", "HOST:PORT"),
        ({"network": {"endpoint": "unix:"}}, "network.endpoint", "or unix:PATH"),
        ({"compute": {"device": None}}, "compute.device", "required"),
        ({"name": ""}, "name", "non-empty string"),
    ],
)
def test_each_problem_names_its_path(changes: dict[str, Any], path: str, fragment: str) -> None:
    found = problems(study(**changes))
    assert path in found, found
    assert fragment in found[path]


def test_an_endpoint_may_be_a_unix_domain_socket() -> None:
    parsed = parse_study(study(network={"endpoint": " unix:/tmp/stratasim/network.sock"}), "study.yaml")
    assert parsed.network.endpoint == "unix:/tmp/stratasim/network.sock"


def test_the_system_section_is_the_system_layers_options() -> None:
    # So a new system option (a field of SystemOptions) is a study key, with its suggestions, from then on.
    found = problems(study(system={"splitz": 4}))
    assert (
        found["system.splitz"]
        == f"unknown key; did you mean 'splits'? expected one of {', '.join(SystemOptions.model_fields)}"
    )


def test_topology_entries_are_named_by_index() -> None:
    topology = copy.deepcopy(GOOD["network"]["topology"])
    topology[1].update(bandwidth="0GB/s", latency="fast", kind="torus", extra=1)
    del topology[0]["size"]
    found = problems(study(network={"topology": topology}))
    assert "must be positive" in found["network.topology[1].bandwidth"]
    assert "cannot read 'fast' as a time" in found["network.topology[1].latency"]
    assert "'ring', 'fully_connected' or 'switch'" in found["network.topology[1].kind"]
    assert "unknown key" in found["network.topology[1].extra"]
    assert found["network.topology[0].size"] == "required"


def test_every_problem_is_reported_at_once() -> None:
    data = study(colour=1, system={"splits": 0, "algorithm": "rign"}, workload={"kind": "nope"}, compute={"device": 3})
    data["network"]["topology"][0]["bandwidth"] = 0
    with pytest.raises(ConfigError) as info:
        parse_study(data, "study.yaml")
    paths = [path for path, _ in info.value.problems]
    assert paths == [
        "colour",
        "workload.kind",
        "system.algorithm",
        "system.splits",
        "network.topology[0].bandwidth",
        "compute.device",
    ]
    message = str(info.value)
    assert message.startswith("study.yaml: 6 problems") and "https://" not in message and "Value error" not in message


def write(tmp_path: Path, data: object, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def test_load_study_reads_yaml_and_applies_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, study())
    s = load_study(path, ["network.topology.1.bandwidth=100GB/s", "network.topology[0].size=4", "system.splits=2"])
    assert isinstance(s, Study) and s.npus == 16 and s.system.splits == 2
    assert s.network.topology[1].bandwidth == 100e9 and s.source == str(path)


def test_override_problems_come_with_schema_problems(tmp_path: Path) -> None:
    path = write(tmp_path, study())
    with pytest.raises(ConfigError) as info:
        load_study(path, ["network.topology.5.bandwidth=1GB/s", "system.splits=0"])
    found = dict(info.value.problems)
    assert "past the end of network.topology (2 entries)" in found["--set network.topology.5.bandwidth=1GB/s"]
    assert "system.splits" in found


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nnetwork:\n  topology: [\n    {kind: ring\n  bad: : :\n")
    with pytest.raises(ConfigError) as info:
        load_study(path)
    assert str(path) in str(info.value)
    ((where, message),) = info.value.problems
    assert where.startswith("line ") and "invalid YAML" in message


def test_duplicate_keys_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nname: y\n")
    with pytest.raises(ConfigError) as info:
        load_study(path)
    assert info.value.problems == [("line 2, column 1", "invalid YAML: duplicate key")]


@pytest.mark.parametrize(
    ("text", "fragment"), [("", "an empty file"), ("- 1\n- 2\n", r"list \[1, 2\]"), ("3\n", "int 3")]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_study(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file") as info:
        load_study(tmp_path / "absent.yaml")
    assert "absent.yaml" in str(info.value)
