"""``stratasim trace export``: a study's workload written as a Chakra or StrataSim trace, one file per NPU, replays
(``kind: chakra`` / ``kind: stratasim_trace``, the rest of the study unchanged) to the same total time, to the
picosecond; bad options and oversized workloads are one ``error:`` line and exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.chakra import et_def_pb2 as et
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import WorkloadError
from stratasim.study.run import run_study
from stratasim.workload_layer.traces.chakra import DURATION_ATTR, ROOT_ATTR, read_trace
from stratasim.workload_layer.traces.native import StrataSimTraceWorkload
from tests.helpers import RunCli
from tests.workload_layer.transformer_helpers import GPT

NETWORK = {
    "backend": "analytical",
    "topology": [
        {"kind": "ring", "size": 2, "bandwidth": "300GB/s", "latency": "500ns"},
        {"kind": "ring", "size": 2, "bandwidth": "100GB/s", "latency": "1us"},
        {"kind": "switch", "size": 2, "bandwidth": "50GB/s", "latency": "2us"},
    ],
}
COMPUTE = {"backend": "roofline", "device": "h100"}
TRANSFORMER = {
    "kind": "transformer",
    "model": GPT,
    "parallelism": {"tp": 2, "pp": 2, "dp": 2, "schedule": "1f1b", "micro_batch": 1, "global_batch": 8},
}
WORKLOADS = {
    # blocks, operators priced by the roofline, tp/dp groups named alike on every rank, pipeline sends
    "transformer": TRANSFORMER,
    # a root, which Chakra has no field for, and one graph object shared by every NPU
    "broadcast": {"kind": "collective", "collective": "broadcast", "size": "3MiB", "root": 5, "repeat": 2},
    "inference": {
        "kind": "transformer_inference",
        "model": GPT,
        "serving": {"batch": 4, "prompt_len": 64, "generate": 4},
        "parallelism": {"tp": 2, "pp": 4},
    },
}
REPLAY_KIND = {"chakra": "chakra", "stratasim": "stratasim_trace"}


def study(workload: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "export",
        "workload": workload,
        "system": {"algorithm": "ring", "splits": 2},
        "network": NETWORK,
        "compute": COMPUTE,
    }


@pytest.mark.parametrize("to", ["chakra", "stratasim"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_an_export_replays_to_the_same_time(run_cli: RunCli, tmp_path: Path, name: str, to: str) -> None:
    original = study(WORKLOADS[name])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(original), encoding="utf-8")
    prefix = tmp_path / "out" / name
    code, out, err = run_cli("trace", "export", str(path), str(prefix), "--to", to)
    assert (code, err) == (0, "")
    suffix = ".et" if to == "chakra" else ".pb"
    assert [(tmp_path / "out" / f"{name}.{npu}{suffix}").is_file() for npu in range(9)] == [True] * 8 + [False]
    replayed = {**original, "workload": {"kind": REPLAY_KIND[to], "path": str(prefix)}}
    expected = run_study(parse_study(original, "original")).total_time_ps
    assert run_study(parse_study(replayed, "replay")).total_time_ps == expected


def test_chakra_export_keeps_exact_durations_and_roots_in_attributes(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study(TRANSFORMER)), encoding="utf-8")
    assert run_cli("trace", "export", str(path), str(tmp_path / "t"), "--to", "chakra")[0] == 0
    _, nodes = read_trace(tmp_path / "t.0.et")
    computes = [node for node in nodes if node.type == et.COMP_NODE]
    exact = [
        next(attr.int64_val for attr in node.attr if attr.name == DURATION_ATTR)
        for node in computes
        if any(attr.name == DURATION_ATTR for attr in node.attr)
    ]
    assert exact, "a roofline-priced GEMM of a small GPT is not a whole number of microseconds"
    assert all(node.duration_micros == round(ps / 10**6) for node, ps in zip(computes, exact) if ps % 10**6)
    path.write_text(yaml.safe_dump(study(WORKLOADS["broadcast"])), encoding="utf-8")
    assert run_cli("trace", "export", str(path), str(tmp_path / "b"), "--to", "chakra")[0] == 0
    (node, _) = read_trace(tmp_path / "b.3.et")[1]
    assert [attr.uint64_val or attr.int64_val for attr in node.attr if attr.name == ROOT_ATTR] == [5]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--to", "json"), "error: --to: expected chakra or stratasim, got 'json'\n"),
        (
            ("--to", "chakra", "--max-npus", "0"),
            "error: --max-npus: expected a whole number of NPUs, at least 1, got '0'\n",
        ),
        (
            ("--to", "chakra", "--max-npus", "4"),
            "error: export: the workload runs on 8 NPUs and an export writes one file "
            "per NPU, more than the limit of 4; raise it with --max-npus 8 to export them all\n",
        ),
        (("--to", "stratasim", "--set", "workload.parallelism.tp=3"), "error: "),
    ],
)
def test_bad_options_are_one_error(run_cli: RunCli, tmp_path: Path, options: tuple[str, ...], message: str) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study(TRANSFORMER)), encoding="utf-8")
    code, out, err = run_cli("trace", "export", str(path), str(tmp_path / "t"), *options)
    assert (code, out) == (2, "") and err.startswith(message) and err.count("error:") == 1
    assert not list(tmp_path.glob("t.*"))


def test_the_default_limit_refuses_gpt3_on_1024_npus(run_cli: RunCli, tmp_path: Path) -> None:
    gpt3 = Path(__file__).resolve().parents[2] / "examples" / "gpt3_175b.yaml"
    code, _, err = run_cli("trace", "export", str(gpt3), str(tmp_path / "g"), "--to", "chakra")
    assert code == 2 and "runs on 1024 NPUs" in err and "limit of 128" in err and "--max-npus 1024" in err
    assert not list(tmp_path.iterdir())


def test_a_stratasim_trace_study_names_what_is_missing(tmp_path: Path) -> None:
    config = StrataSimTraceWorkload.Config
    with pytest.raises(WorkloadError, match=r"no StrataSim traces match .*none\.<rank>\.pb"):
        StrataSimTraceWorkload(config(path=str(tmp_path / "none"))).npus_required()
    (tmp_path / "t.0.pb").write_bytes(b"")
    with pytest.raises(WorkloadError, match="workload.npus is 2 but 1 StrataSim traces match"):
        StrataSimTraceWorkload(config(path=str(tmp_path / "t"), npus=2)).npus_required()
    with pytest.raises(WorkloadError, match=r"t\.0\.pb: expected one ExecutionGraph record, found 0"):
        StrataSimTraceWorkload(config(path=str(tmp_path / "t"))).graphs(1)
