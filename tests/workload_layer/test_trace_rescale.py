"""``stratasim trace rescale``: a model-built Chakra trace rescaled to another data-parallel degree replays to the
time of the same study built at that degree directly, to the picosecond; bad options and traces are one
``error:`` line naming the option or file, and exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.chakra.et_def_pb2 import GlobalMetadata
from stratasim.config.study_file import parse_study
from stratasim.study.run import run_study
from stratasim.workload_layer.traces.chakra import read_trace, write_trace
from tests.helpers import RunCli
from tests.workload_layer.transformer_helpers import GPT


def study(
    dp: int, workload: dict[str, Any] | None = None, order: tuple[str, ...] = ("tp", "pp", "dp")
) -> dict[str, Any]:
    """A study on tp 2 x pp 2 x ``dp`` NPUs, two micro-batches per replica (weak scaling: the batch grows with DP),
    the groups mapped onto the topology's dimensions in ``order``."""
    plan = {
        "tp": 2,
        "pp": 2,
        "dp": dp,
        "schedule": "1f1b",
        "micro_batch": 1,
        "global_batch": 2 * dp,
        "dp_bucket": "4MiB",
        "order": list(order),
    }
    sizes = {"tp": 2, "pp": 2, "dp": dp}
    speeds = [("300GB/s", "500ns"), ("100GB/s", "1us"), ("50GB/s", "2us")]
    return {
        "name": "rescale",
        "system": {"algorithm": "ring", "splits": 2},
        "workload": workload or {"kind": "transformer", "model": GPT, "parallelism": plan},
        "network": {
            "backend": "analytical",
            "topology": [
                {"kind": "ring" if i < 2 else "switch", "size": sizes[axis], "bandwidth": bandwidth, "latency": latency}
                for i, (axis, (bandwidth, latency)) in enumerate(zip(order, speeds))
            ],
        },
        "compute": {"backend": "roofline", "device": "h100"},
    }


def export(run_cli: RunCli, tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert run_cli("trace", "export", str(path), str(tmp_path / "t"), "--to", "chakra")[0] == 0
    return tmp_path / "t"


def replayed(data: dict[str, Any], prefix: Path) -> int:
    return run_study(parse_study({**data, "workload": {"kind": "chakra", "path": str(prefix)}}, "replay")).total_time_ps


@pytest.mark.parametrize(("dp", "order"), [(1, ("tp", "pp", "dp")), (4, ("tp", "pp", "dp")), (3, ("dp", "tp", "pp"))])
def test_a_rescaled_transformer_replays_to_the_time_built_directly(
    run_cli: RunCli, tmp_path: Path, dp: int, order: tuple[str, ...]
) -> None:
    prefix = export(run_cli, tmp_path, study(2, order=order))
    code, out, err = run_cli(
        "trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", str(4 * dp), "--dp", str(dp)
    )
    assert (code, err) == (0, "") and f"wrote {4 * dp + 1} files" in out
    direct = run_study(parse_study(study(dp, order=order), "direct")).total_time_ps
    assert replayed(study(dp, order=order), tmp_path / "r") == direct


def test_a_purely_data_parallel_trace_needs_no_plan(run_cli: RunCli, tmp_path: Path) -> None:
    collective = {"kind": "collective", "collective": "all_reduce", "size": "8MiB", "repeat": 2}
    prefix = export(
        run_cli,
        tmp_path,
        {
            **study(2, collective),
            "network": {
                "backend": "analytical",
                "topology": [{"kind": "ring", "size": 8, "bandwidth": "100GB/s", "latency": "1us"}],
            },
        },
    )
    assert run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "16")[0] == 0
    sixteen = {
        **study(2, collective),
        "network": {
            "backend": "analytical",
            "topology": [{"kind": "ring", "size": 16, "bandwidth": "100GB/s", "latency": "1us"}],
        },
    }
    assert replayed(sixteen, tmp_path / "r") == run_study(parse_study(sixteen, "direct")).total_time_ps


def test_the_plan_travels_in_the_metadata(run_cli: RunCli, tmp_path: Path) -> None:
    prefix = export(run_cli, tmp_path, study(2))
    metadata, _ = read_trace(f"{prefix}.5.et")
    plan = {
        attr.name: getattr(attr, str(attr.WhichOneof("value"))) for attr in metadata.attr if "parallelism" in attr.name
    }
    assert plan == {
        "stratasim.parallelism.tp": 2,
        "stratasim.parallelism.pp": 2,
        "stratasim.parallelism.dp": 2,
        "stratasim.parallelism.ep": 1,
        "stratasim.parallelism.zero": 0,
        "stratasim.parallelism.order": "tp,pp,dp",
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--npus", "6"],
            "--npus 6: the trace's plan ({first}) has tp 2 x pp 2 = 4 ranks per data-parallel replica, "
            "so the rank count must be a positive multiple of 4",
        ),
        (["--npus", "8", "--dp", "4"], "--dp 4: with tp 2 and pp 2, --npus 8 makes dp 2"),
        (
            ["--npus", "8", "--tp", "4"],
            "--tp 4: the trace ({first}) was recorded with tp 2; rescale changes DP only: re-shard TP with "
            "stratasim trace reshard",
        ),
        (["--npus", "16", "--pp", "4"], "--pp 4: the trace ({first}) was recorded with pp 2"),
    ],
)
def test_a_plan_the_ranks_cannot_fill_is_refused(
    run_cli: RunCli, tmp_path: Path, options: list[str], message: str
) -> None:
    prefix = export(run_cli, tmp_path, study(2))
    code, out, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), *options)
    assert (code, out) == (2, "") and err.startswith("error: " + message.format(first=f"{prefix}.0.et"))
    assert not list(tmp_path.glob("r.*"))


def test_too_many_ranks_and_stale_rank_files_are_refused(run_cli: RunCli, tmp_path: Path) -> None:
    prefix = export(run_cli, tmp_path, study(2))
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "400000000")
    assert (code, err) == (
        2,
        "error: --npus 400000000: a rescaled trace has a file per rank, more than the limit of "
        "128; raise it with --max-npus 400000000\n",
    )
    # Rescaling a trace onto itself, to fewer ranks, would leave ranks 4..7 to be read with the new ones.
    code, _, err = run_cli("trace", "rescale", str(prefix), str(prefix), "--npus", "4")
    assert (code, err) == (
        2,
        f"error: {prefix}.4.et exists: the rescaled trace has ranks 0..3, and a replay would "
        "read it as one more; remove the old trace or write elsewhere\n",
    )


def test_one_replica_has_no_gradient_all_reduce_to_replicate(run_cli: RunCli, tmp_path: Path) -> None:
    prefix = export(run_cli, tmp_path, study(1))
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "8")
    assert (code, err) == (
        2,
        f"error: --npus 8: the trace ({prefix}.0.et) was recorded with dp 1, so it holds no "
        "gradient all-reduce to replicate; record it with at least 2 data-parallel replicas\n",
    )
    collective = {"kind": "collective", "collective": "all_reduce", "size": "8MiB"}
    single = {
        **study(1, collective),
        "network": {
            "backend": "analytical",
            "topology": [{"kind": "ring", "size": 1, "bandwidth": "100GB/s", "latency": "1us"}],
        },
    }
    (tmp_path / "single").mkdir()
    prefix = export(run_cli, tmp_path / "single", single)
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "8")
    assert code == 2 and f"({prefix}.0.et) was recorded with dp 1" in err


def test_zero_cannot_change_dp(run_cli: RunCli, tmp_path: Path) -> None:
    data = study(2)
    data["workload"]["parallelism"]["zero"] = 1
    prefix = export(run_cli, tmp_path, data)
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "16")
    assert code == 2 and "ZeRO stage 1 shards memory over DP, which a change of DP cannot rescale" in err


def test_missing_ranks_and_missing_plans_are_refused(run_cli: RunCli, tmp_path: Path) -> None:
    prefix = export(run_cli, tmp_path, study(2))
    Path(f"{prefix}.3.et").unlink()
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "16")
    assert (code, err) == (2, f"error: {prefix}: ranks must be 0..N-1; {prefix}.3.et is missing (found up to rank 7)\n")
    prefix = export(run_cli, tmp_path, study(2))
    for rank in range(8):
        _, nodes = read_trace(f"{prefix}.{rank}.et")
        write_trace(f"{prefix}.{rank}.et", GlobalMetadata(version="0.0.4"), nodes)
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "16")
    assert code == 2 and err.startswith(f"error: {prefix}.0.et: node ")
    assert "the trace records no parallel plan" in err and "and this node is not" in err and err.count("\n") == 1


def test_an_all_to_all_is_not_data_parallel(run_cli: RunCli, tmp_path: Path) -> None:
    collective = {"kind": "collective", "collective": "all_to_all", "size": "8MiB"}
    prefix = export(run_cli, tmp_path, study(2, collective))
    code, _, err = run_cli("trace", "rescale", str(prefix), str(tmp_path / "r"), "--npus", "16")
    assert code == 2 and err.startswith(f"error: {prefix}.0.et: node 0:") and "purely data-parallel" in err
