"""Every dimensioned quantity of a study carries its unit: a bare number is one clear error naming the key and
suggesting a unit (what the old default unit would have made of it, and an example); keys whose name says the
unit (``flit_bytes``, ``usd_per_hour``, ``mac_pj``) and counts and ratios stay plain numbers. A validated section
dumps its quantities with their base unit written out, so it validates back to itself."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import stratasim
from stratasim.cli import main
from stratasim.config.study_file import load_study, parse_study
from stratasim.explore import ResultStore, load_sweep, run_sweep
from stratasim.kernel.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "quickstart.yaml"

STUDY: dict[str, Any] = {
    "name": "units",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
    "system": {"algorithm": "ring", "endpoint_delay": "10ns"},
    "network": {"topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}]},
}


def _with(path: str, value: object, study: dict[str, Any] | None = None) -> dict[str, Any]:
    """``study`` (default :data:`STUDY`) with the dotted key ``path`` set to ``value``."""
    data = copy.deepcopy(study or STUDY)
    *parents, last = path.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    node[last] = value
    return data


BARE = [  # (dotted key as set, as reported, value, the message)
    (
        "workload.size",
        "workload.size",
        1048576,
        "1048576 has no unit; write 1048576B if you meant that, or e.g. 64MiB or 1GB",
    ),
    (
        "network.topology.0.bandwidth",
        "network.topology[0].bandwidth",
        100000000000,
        "100000000000 has no unit; write 100000000000GB/s if you meant that, or e.g. 100GB/s or 400Gbps",
    ),
    (
        "network.topology.0.latency",
        "network.topology[0].latency",
        0,
        "0 has no unit; write it with one, e.g. 500ns or 1.5us",
    ),
    (
        "system.endpoint_delay",
        "system.endpoint_delay",
        2.5,
        "2.5 has no unit; write 2.5ns if you meant that, or e.g. 500ns or 1.5us",
    ),
    (
        "system.local_mem_bw",
        "system.local_mem_bw",
        1600,
        "1600 has no unit; write 1600GB/s if you meant that, or e.g. 100GB/s or 400Gbps",
    ),
    (
        "system.memory_capacity",
        "system.memory_capacity",
        "80",
        "80 has no unit; write 80B if you meant that, or e.g. 64MiB or 1GB",
    ),
    (
        "network.energy_per_bit",
        "network.energy_per_bit",
        4,
        "4 has no unit; write 4pJ/bit if you meant that, or e.g. 1.3pJ/bit or 500fJ/bit",
    ),
    (
        "network.flit.cycle",
        "network.flit.cycle",
        1,
        "1 has no unit; write 1ns if you meant that, or e.g. 500ns or 1.5us",
    ),
    (
        "compute.device.peak.bf16",
        "compute.device.peak.bf16",
        1000,
        "1000 has no unit; write 1000TFLOPS if you meant that, or e.g. 989TFLOPS or 312TFLOP/s",
    ),
    (
        "compute.device.memory_bandwidth",
        "compute.device.memory_bandwidth",
        3350,
        "3350 has no unit; write 3350GB/s if you meant that",
    ),
    ("compute.device.tdp", "compute.device.tdp", 700, "700 has no unit; write it with one, e.g. 700W or 1.2kW"),
    (
        "compute.calibration.launch_overhead",
        "compute.calibration.launch_overhead",
        5,
        "5 has no unit; write 5ns if you meant that",
    ),
]


def _device_base(key: str) -> dict[str, Any]:
    return (
        _with("compute", {"backend": "roofline", "device": {"preset": "h100"}}) if key.startswith("compute") else STUDY
    )


@pytest.mark.parametrize(("key", "where", "value", "message"), BARE, ids=[case[0] for case in BARE])
def test_a_bare_number_is_refused_naming_the_key(key: str, where: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_study(_with(key, value, _device_base(key)), "study.yaml")
    problems = dict(raised.value.problems)
    assert list(problems) == [where] and problems[where].startswith(message)


def test_a_bare_clock_and_compute_time_are_refused() -> None:
    accelerator = _with("compute", {"backend": "timeloop", "device": {"preset": "gemmini", "clock": 1000000000}})
    with pytest.raises(ConfigError) as raised:
        parse_study(accelerator, "study.yaml")
    assert raised.value.problems == [
        ("compute.device.clock", "1000000000 has no unit; write 1000000000Hz if you meant that, or e.g. 700MHz or 1GHz")
    ]
    loop = _with("workload", {"kind": "training_loop", "layers": [{"name": "l", "forward": 120}]})
    with pytest.raises(ConfigError) as raised:
        parse_study(loop, "study.yaml")
    assert raised.value.problems == [
        ("workload.layers[0].forward.time", "120 has no unit; write 120ns if you meant that, or e.g. 500ns or 1.5us")
    ]


def test_the_same_values_with_units_give_the_same_study() -> None:
    written = parse_study(_with("system.local_mem_bw", "1600GB/s"), "study.yaml")
    assert (written.system.local_mem_bw, written.system.endpoint_delay) == (1600 * 10**9, 10_000)
    assert written.network.topology[0].bandwidth == 50e9 and written.workload.config.size == 2**20


def test_keys_whose_name_says_the_unit_take_numbers() -> None:
    study = _with(
        "network.flit",
        {"flit_bytes": 16, "header_bytes": "8B", "vcs": 2, "cycle": "1ns"},
        _with("network.backend", "flit_level"),
    )
    study = _with(
        "compute",
        {
            "backend": "roofline",
            "device": {"preset": "h100", "usd_per_hour": 2.5, "price_usd": 25000},
            "calibration": {"compute_efficiency": 0.8, "memory_efficiency": 0.9},
        },
        study,
    )
    parsed = parse_study(study, "study.yaml")
    assert (parsed.network.flit.flit_bytes, parsed.network.flit.header_bytes) == (16, 8)
    accelerator = parse_study(
        _with("compute", {"backend": "timeloop", "device": {"preset": "gemmini", "mac_pj": 0.1, "clock": "1GHz"}}),
        "s.yaml",
    )
    assert accelerator.compute.device.mac_pj == 0.1


def test_the_python_api_refuses_a_bare_number_with_its_error() -> None:
    with pytest.raises(ConfigError, match=r"network.topology\[0\].bandwidth: 50 has no unit; write 50GB/s"):
        stratasim.run(_with("network.topology.0.bandwidth", 50))
    with pytest.raises(ConfigError, match=r"system.endpoint_delay: 10 has no unit; write 10ns"):
        stratasim.run(QUICKSTART, system__endpoint_delay=10)
    assert (
        stratasim.run(QUICKSTART, system__endpoint_delay="10ns").total_time_ps
        == stratasim.run(QUICKSTART).total_time_ps
    )


def test_the_cli_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(QUICKSTART), "--set", "network.topology.0.bandwidth=100000000000"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.splitlines() == [
        f"error: {QUICKSTART}: 1 problem",
        "  network.topology[0].bandwidth: 100000000000 has no unit; write 100000000000GB/s "
        "if you meant that, or e.g. 100GB/s or 400Gbps",
    ]


def test_a_study_file_with_a_bare_number_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bare.yaml"
    path.write_text(yaml.safe_dump(_with("workload.size", 1024)), encoding="utf-8")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "  workload.size: 1024 has no unit; write 1024B if you meant that" in err and "Traceback" not in err


def _sweep(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: {QUICKSTART}\n{body}", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        (
            "space:\n  system.splits: [1, 2]\n  network.topology.0.bandwidth: [50GB/s, 200]\n",
            "space.network.topology.0.bandwidth",
            "200 has no unit; write 200GB/s if you meant that",
        ),
        (
            "space:\n  network.topology.1.latency: {low: 1, high: 4, count: 2}\n",
            "space.network.topology.1.latency",
            "1 has no unit; write 1ns if you meant that",
        ),
        (
            "space:\n  system.splits: [1, 2]\nfidelity:\n  - {name: a, set: {system.endpoint_delay: 7}, keep: {top: 1}}\n"
            "  - {name: b, set: {network.backend: congestion_aware}}\n",
            "fidelity[0].set.system.endpoint_delay",
            "7 has no unit; write 7ns if you meant that",
        ),
    ],
)
def test_a_sweep_with_bare_numbers_stops_before_any_trial(tmp_path: Path, body: str, where: str, message: str) -> None:
    sweep = load_sweep(_sweep(tmp_path, body))
    with pytest.raises(ConfigError) as raised:
        run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()))
    assert [path for path, _ in raised.value.problems] == [where]
    assert raised.value.problems[0][1].startswith(message)
    assert ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()).finished() == {}


def test_a_sweep_with_bare_numbers_fails_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = _sweep(tmp_path, "space:\n  network.topology.0.bandwidth: [100]\n")
    assert main(["sweep", str(sweep), "--db", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err
    assert "  space.network.topology.0.bandwidth: 100 has no unit" in err and "Traceback" not in err


@pytest.mark.filterwarnings("error")  # a section pydantic cannot dump as its own type fails
@pytest.mark.parametrize("example", sorted(path.name for path in EXAMPLES.glob("*.yaml")))
def test_a_dumped_section_validates_back_to_itself(example: str) -> None:
    study = load_study(EXAMPLES / example)
    sections = [study.workload.config, study.system, study.network, *([study.compute] if study.compute else [])]
    for section in sections:
        dumped = section.model_dump(exclude_unset=True)
        assert type(section).model_validate(dumped) == section


def test_a_dumped_quantity_is_its_base_unit_written_out() -> None:
    study = load_study(QUICKSTART)
    assert study.network.model_dump()["topology"][1] == {
        "kind": "switch",
        "size": 4,
        "bandwidth": "25000000000.0B/s",
        "latency": "1000000ps",
        "backend": None,
        "energy_per_bit": None,
        "in_network_reduction": False,
    }
    assert study.system.model_dump()["endpoint_delay"] == "10000ps"


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--size", "1048576"],
        ["import", "astra", "--network", "n.yml", "--system", "s.json", "--size", "1048576"],
    ],
)
def test_a_size_option_without_its_unit_is_named(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "argument --size: " in err and "1048576 has no unit; write 1048576B if you meant that" in err
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith("or e.g. 64MiB or 1GB")
