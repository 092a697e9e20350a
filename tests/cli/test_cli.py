"""The ``stratasim`` command in-process: exit codes, one clear message, JSON and files; and ``python -m``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stratasim.cli import study_commands
from stratasim.config.study_file import load_study
from stratasim.kernel.errors import RemoteError
from stratasim.study.run import run_study
from tests.helpers import RunCli
from tests.report.test_report import CONTRACT  # the JSON fields tools rely on, stated once

ROOT = Path(__file__).resolve().parents[2]


def test_check_ok(run_cli: RunCli, study_file: Path) -> None:
    code, out, err = run_cli("check", str(study_file))
    assert code == 0 and err == ""
    assert out.strip() == "OK: tiny — 8 NPUs, workload fake, network analytical"


def test_check_names_each_dimension_s_backend_when_they_mix(run_cli: RunCli) -> None:
    """Issue 14's defect: ``check`` said ``analytical`` for a study mixing backends per dimension."""
    code, out, _ = run_cli(
        "check",
        str(ROOT / "examples" / "quickstart.yaml"),
        "--set",
        "network.topology.1.backend=congestion_aware",
    )
    assert code == 0 and out.strip().endswith("network mixed (dim 0 analytical, dim 1 congestion_aware)")


def test_device_names_match_in_any_case(run_cli: RunCli) -> None:
    """Issue 14's defect: ``--device H100`` was taken by ``cost`` and refused by ``run``; every backend looks names
    up case-insensitively, and so do ``run`` and ``check`` now, with the same times."""
    study = ROOT / "examples" / "training_loop.yaml"
    assert run_cli("check", str(study), "--set", "compute.device=H100")[0] == 0
    upper = run_study(load_study(study, ["compute.device=H100"]))
    assert upper.result == run_study(load_study(study)).result


def test_check_reports_every_problem_without_traceback(run_cli: RunCli, study_file: Path) -> None:
    code, out, err = run_cli(
        "check", str(study_file), "--set", "network.topology[1].bandwidth=0GB/s", "--set", "system.splits=zero"
    )
    assert code == 2 and out == ""
    assert err.startswith(f"error: {study_file}: 2 problems")
    assert "network.topology[1].bandwidth: a bandwidth must be positive" in err
    assert "system.splits:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("workload.npus=9", "workload needs 9 NPUs but the topology has 8 (network.topology)"),
        ("compute.device=abacus", "compute.device: roofline has no device 'abacus'"),
    ],
)
def test_check_catches_what_only_building_shows(
    run_cli: RunCli, study_file: Path, override: str, fragment: str
) -> None:
    code, _, err = run_cli("check", str(study_file), "--set", override)
    assert code == 2 and fragment in err and err.count("\n") == 1


def test_missing_file_and_bad_usage(run_cli: RunCli, tmp_path: Path) -> None:
    code, _, err = run_cli("check", str(tmp_path / "absent.yaml"))
    assert code == 2 and "absent.yaml" in err and "no such file" in err
    code, _, err = run_cli("frobnicate")
    assert code == 2 and "usage:" in err
    code, _, err = run_cli("serve", "network", "--backend", "analytical", "--listen", "nowhere")
    assert code == 2 and "HOST:PORT" in err


def test_run_prints_the_table(run_cli: RunCli, study_file: Path) -> None:
    code, out, err = run_cli("run", str(study_file))
    assert code == 0 and err == ""
    assert out.startswith("tiny: 8 NPUs, 1 collective") and "all_reduce" in out and "per NPU" in out


def test_run_json_has_every_contract_field(run_cli: RunCli, study_file: Path) -> None:
    code, out, _ = run_cli("run", str(study_file), "--json")
    assert code == 0
    report = json.loads(out)
    assert set(report) >= CONTRACT
    assert report["npus"] == 8 and report["compute_time_ns"] == 2000.0
    assert report["total_time_ns"] == report["total_time_ps"] / 1000 > report["compute_time_ns"]
    assert report["exposed_comm_ns"] == report["total_time_ns"] - 2000.0
    assert report["backends"] == {"network": "analytical (in-process)", "compute": "roofline (in-process)"}
    (collective,) = report["collectives"]
    assert collective["type"] == "all_reduce" and collective["bytes"] == 2**20 and collective["start_ns"] == 2000.0
    assert len(collective["queue_delay_ns_per_phase"]) == len(collective["network_delay_ns_per_phase"]) == 2
    assert [n["npu"] for n in report["per_npu"]] == list(range(8))


def test_workload_may_use_fewer_npus_than_the_topology(run_cli: RunCli, study_file: Path) -> None:
    code, out, _ = run_cli("run", str(study_file), "--json", "--set", "workload.npus=4")
    report = json.loads(out)
    assert code == 0 and report["npus"] == 4 and len(report["per_npu"]) == 4
    assert len(report["collectives"][0]["network_delay_ns_per_phase"]) == 1  # only the ring dimension is used


def test_run_out_writes_report_and_trace(run_cli: RunCli, study_file: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "results"
    code, out, _ = run_cli("run", str(study_file), "--json", "--out", str(out_dir))
    assert code == 0 and json.loads(out) == json.loads((out_dir / "report.json").read_text())
    trace = json.loads((out_dir / "trace.json").read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    processes = {e["pid"]: e["args"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {e["pid"] for e in complete} == set(processes) == {0}  # equivalent NPUs: NPU 0 was simulated for all 8
    assert processes[0] == {"name": "NPU 0 (stands for 8 NPUs)", "stands_for": "0-7"}
    assert {"compute"} < {e["cat"] for e in complete}
    assert all(e["dur"] >= 0 for e in complete)


def test_run_is_deterministic(study_file: Path) -> None:
    first, second = (run_study(load_study(study_file)).to_dict() for _ in range(2))
    first.pop("wall_seconds"), second.pop("wall_seconds")
    assert first == second


def test_remote_failure_is_one_message(run_cli: RunCli, study_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stratasim import remote

    def unreachable(endpoint: str, *, backend: str) -> None:
        raise RemoteError(f"network layer at {endpoint} is unreachable")

    monkeypatch.setattr(remote, "open_network", unreachable)
    code, out, err = run_cli("run", str(study_file), "--set", "network.endpoint=127.0.0.1:9")
    assert code == 2 and out == "" and err == "error: network layer at 127.0.0.1:9 is unreachable\n"


def test_keyboard_interrupt_exits_130(run_cli: RunCli, study_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(study_commands, "run_study", interrupted)
    code, _, _ = run_cli("run", str(study_file))
    assert code == 130


@pytest.mark.parametrize("example", ["quickstart.yaml", "training_loop.yaml"])
def test_examples_run(run_cli: RunCli, example: str) -> None:
    code, out, err = run_cli("run", str(ROOT / "examples" / example), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["total_time_ps"] > 0 and report["collectives"] and report["wall_seconds"] < 5


def test_layers_only_when_asked(run_cli: RunCli) -> None:
    """``--layers`` computes the per-layer breakdown: the JSON's ``layers`` and the text's table; without it, none."""
    study = str(ROOT / "examples" / "transformer.yaml")
    small = ("--set", "workload.model.layers=2", "--set", "workload.parallelism.global_batch=8")
    code, out, err = run_cli("run", study, *small, "--json")
    assert code == 0, err
    assert "layers" not in json.loads(out)
    code, out, err = run_cli("run", study, *small, "--json", "--layers")
    assert code == 0, err
    assert any(row["layer"].startswith("layer") for row in json.loads(out)["layers"])
    code, out, err = run_cli("run", study, *small, "--layers")
    assert code == 0, err
    assert "Per layer, NPU" in out


def test_python_dash_m_checks_the_quickstart() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stratasim", "check", str(ROOT / "examples" / "quickstart.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK: quickstart — 32 NPUs, workload collective, network analytical")


def test_a_spawned_transformer_gives_the_in_process_result() -> None:
    # Stand-ins replay their mirrored phases, pipeline transfers cross the network, and each kind of message is
    # priced by the server once: every simulated figure agrees with the in-process run.
    example = ROOT / "examples" / "transformer.yaml"
    local = run_study(load_study(example)).to_dict()
    remote = run_study(load_study(example, ["network.spawn=true", "compute.spawn=true"])).to_dict()
    for report in (local, remote):
        del report["wall_seconds"], report["backends"]
    assert local == remote  # the engine took the in-process paths: even the count of events agrees


def test_serve_listens_on_a_unix_domain_socket(tmp_path: Path) -> None:
    from stratasim.remote import NetworkClient, spawn

    socket = tmp_path / "network.sock"
    command = [
        sys.executable,
        "-m",
        "stratasim",
        "serve",
        "network",
        "--backend",
        "analytical",
        "--listen",
        f"unix:{socket}",
    ]
    with spawn("network", "analytical", command=command) as endpoint:
        assert endpoint == f"unix:{socket}"
        client = NetworkClient(endpoint, backend="analytical", timeout_s=10)
        try:
            assert client.configure(load_study(ROOT / "examples" / "quickstart.yaml").topology_proto()).npus == 32
        finally:
            client.close()


def test_spawned_layers_give_the_in_process_result() -> None:
    quickstart = ROOT / "examples" / "quickstart.yaml"
    local = run_study(load_study(quickstart)).to_dict()
    remote = run_study(load_study(quickstart, ["network.spawn=true", "compute.spawn=true"])).to_dict()
    assert remote["backends"]["network"].startswith("analytical @ unix:")  # a spawned server's Unix-domain socket
    assert remote["backends"]["compute"].endswith("(spawned)")
    for report in (local, remote):
        # Spawned, the analytical network still prices each message as it is sent (no time windows, the server
        # asked once per kind of message), so the engine processes the same events as in-process.
        del report["wall_seconds"], report["backends"]
    assert local == remote
