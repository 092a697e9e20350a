"""The flit-level network in study files: ``stratasim run`` gives the same report in-process and with the
network in a spawned server, on a fabric and on a list of dimensions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim import cli
from tests.helpers import RunCli

LINK = {"bandwidth": "50GB/s", "latency": "500ns"}
TOPOLOGIES = {
    "torus": {"kind": "torus", "shape": [4, 4], **LINK},
    "dimensions": [
        {"kind": "ring", "size": 4, **LINK},
        {"kind": "switch", "size": 2, "bandwidth": "25GB/s", "latency": "1us"},
    ],
}


def report(path: Path, run_cli: RunCli, *overrides: str) -> dict[str, Any]:
    arguments = ["run", str(path), "--json"]
    for override in overrides:
        arguments += ["--set", override]
    code, out, err = run_cli(*arguments)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_a_collective_study_gives_the_same_report_in_process_and_spawned(
    name: str, tmp_path: Path, run_cli: RunCli
) -> None:
    study = {
        "name": f"flit {name}",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "64KiB"},
        "system": {"algorithm": "ring", "splits": 2},
        "network": {"backend": "flit_level", "topology": TOPOLOGIES[name]},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    local = report(path, run_cli)
    remote = report(path, run_cli, "network.spawn=true")
    analytical = report(path, run_cli, "network.backend=analytical")
    assert local["backends"]["network"] == "flit_level (in-process)"
    assert remote["backends"]["network"].startswith("flit_level @ unix:")
    assert local["total_time_ps"] > analytical["total_time_ps"]
    latency = local["packet_latency"]
    assert latency["packets"] > 0 and "packet_latency" not in analytical
    assert latency["min_ns"] <= latency["p50_ns"] <= latency["p99_ns"] <= latency["max_ns"]
    assert latency["min_ns"] <= latency["mean_ns"] <= latency["max_ns"]
    for result in (local, remote):
        del result["wall_seconds"], result["backends"]
    assert local == remote  # packet latency included


def test_network_flit_sets_the_routers_in_process_and_spawned(tmp_path: Path, run_cli: RunCli) -> None:
    study = {
        "name": "flit parameters",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "64KiB"},
        "network": {
            "backend": "flit_level",
            "topology": TOPOLOGIES["torus"],
            "flit": {"flit_bytes": "16B", "vcs": 2, "pipeline_cycles": 2, "cycle": "500ps"},
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    local = report(path, run_cli)
    remote = report(path, run_cli, "network.spawn=true")
    default = report(
        path,
        run_cli,
        "network.flit.flit_bytes=64B",
        "network.flit.vcs=4",
        "network.flit.pipeline_cycles=4",
        "network.flit.cycle=1ns",
    )
    assert local["total_time_ps"] != default["total_time_ps"]
    for result in (local, remote):
        del result["wall_seconds"], result["backends"]
    assert local == remote


def test_a_bad_flit_parameter_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = {
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "64KiB"},
        "network": {"backend": "flit_level", "topology": TOPOLOGIES["torus"], "flit": {"vcs": 0}},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    assert cli.main(["run", str(path)]) == 2
    assert "network.flit.vcs" in capsys.readouterr().err


def test_flit_parameters_without_the_flit_level_backend_are_refused(tmp_path: Path) -> None:
    from stratasim.config.study_file import load_study
    from stratasim.kernel.errors import ConfigError

    study = {
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "64KiB"},
        "network": {"backend": "analytical", "topology": TOPOLOGIES["torus"], "flit": {"vcs": 2}},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    with pytest.raises(ConfigError, match="network.flit: only the flit_level backend reads it"):
        load_study(path)


def test_the_text_report_gives_the_packet_latency_under_the_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = {
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "64KiB"},
        "network": {"backend": "flit_level", "topology": TOPOLOGIES["torus"]},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    assert cli.main(["run", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    latency = next(i for i, line in enumerate(lines) if line.startswith("packet latency over "))
    assert lines.index(next(line for line in lines if line.startswith("busiest links"))) < latency
    assert all(f"{key} " in lines[latency] for key in ("mean", "p50", "p99", "max"))
