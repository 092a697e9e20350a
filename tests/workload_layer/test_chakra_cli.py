"""``stratasim trace inspect`` and ``stratasim trace convert`` on the reference Chakra traces and on bad input, and
``stratasim check`` / ``run`` on studies replaying defective Chakra traces: each one ``error:`` line, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.workload_layer.traces.chakra import read_trace, to_graph, trace_files, write_trace
from tests.data import ASTRA_INPUTS
from tests.helpers import RunCli

WORKLOADS = ASTRA_INPUTS / "workload"
RESNET = WORKLOADS / "e2e_text_converted" / "Resnet50_DataParallel_8npus" / "Resnet50_DataParallel"
CUSTOM = WORKLOADS / "custom_collective_ring_allreduce_8npus_1MB" / "custom_allreduce"


def run(run_cli: RunCli, *argv: str) -> tuple[int, str, str]:
    return run_cli("trace", *argv)


def test_inspect_a_prefix(run_cli: RunCli) -> None:
    code, out, err = run(run_cli, "inspect", str(RESNET))
    assert code == 0 and not err
    assert "ranks: 8" in out and "COMP_NODE: 1288" in out and "ALL_REDUCE: 432" in out
    assert "compute: " in out


def test_inspect_one_file(run_cli: RunCli) -> None:
    code, out, _ = run(run_cli, "inspect", f"{CUSTOM}.3.et")
    assert code == 0
    assert "ranks: 1" in out and "COMM_SEND_NODE: 14" in out and "point-to-point sends: 1835008 bytes" in out


def test_convert_there_and_back(run_cli: RunCli, tmp_path: Path) -> None:
    code, out, _ = run(run_cli, "convert", str(CUSTOM), str(tmp_path / "ir"), "--to", "stratasim")
    assert code == 0 and "wrote 8 files" in out and (tmp_path / "ir.7.pb").is_file()
    code, out, _ = run(run_cli, "convert", str(tmp_path / "ir"), str(tmp_path / "back"), "--to", "chakra")
    assert code == 0
    for rank, (original, back) in enumerate(zip(trace_files(CUSTOM), trace_files(tmp_path / "back"), strict=True)):
        assert to_graph(read_trace(original)[1], rank, 8) == to_graph(read_trace(back)[1], rank, 8)
    code, out, _ = run(run_cli, "inspect", str(tmp_path / "ir"))
    assert code == 0 and "COMM_RECV_NODE: 112" in out


def test_convert_makes_the_output_folder(run_cli: RunCli, tmp_path: Path) -> None:
    """Issue 14's defect: ``trace convert`` into a folder that does not exist yet makes it."""
    code, out, _ = run(run_cli, "convert", str(CUSTOM), str(tmp_path / "new" / "deeper" / "ir"), "--to", "stratasim")
    assert code == 0 and (tmp_path / "new" / "deeper" / "ir.7.pb").is_file()


def test_bad_input_is_one_error(run_cli: RunCli, tmp_path: Path) -> None:
    code, out, err = run(run_cli, "inspect", str(tmp_path / "nothing"))
    assert code == 2 and not out and err.startswith("error: no Chakra") and err.count("\n") == 1
    (tmp_path / "bad.0.et").write_bytes(b"\x05abc")
    code, _, err = run(run_cli, "inspect", str(tmp_path / "bad"))
    assert code == 2 and "bad.0.et: truncated record at byte 0" in err
    code, _, err = run(run_cli, "convert", str(tmp_path / "bad"), str(tmp_path / "out"), "--to", "stratasim")
    assert code == 2 and "truncated record" in err
    code, _, err = run(run_cli, "convert", str(tmp_path / "bad"), str(tmp_path / "out"), "--to", "chakra")
    assert code == 2 and "error: no Chakra traces match" in err and ".<rank>.pb" in err
    write_trace(tmp_path / "ok.0.et", et.GlobalMetadata(), [et.Node(id=1, type=et.COMP_NODE)])
    code, _, err = run(run_cli, "convert", str(tmp_path / "ok"), str(tmp_path / "ok.0.et" / "x"), "--to", "stratasim")
    assert code == 2 and "cannot write the trace" in err  # under a file: no folder can be made there
    assert run(run_cli, "convert", "a", "b")[0] == 2  # --to is required


def node(node_id: int, *deps: int, pg_name: str = "") -> et.Node:
    """A 1 us compute node, or with ``pg_name`` a 1 KiB all-reduce over that communicator, after ``deps``."""
    if not pg_name:
        return et.Node(id=node_id, name=f"n{node_id}", type=et.COMP_NODE, duration_micros=1, data_deps=deps)
    attrs = [
        et.AttributeProto(name="comm_type", int64_val=et.ALL_REDUCE),
        et.AttributeProto(name="comm_size", int64_val=1024),
        et.AttributeProto(name="pg_name", string_val=pg_name),
    ]
    return et.Node(id=node_id, name=f"n{node_id}", type=et.COMM_COLL_NODE, data_deps=deps, attr=attrs)


def study(tmp_path: Path, ranks: int, nodes: list[et.Node]) -> Path:
    """A study replaying ``nodes`` on each of ``ranks`` ranks on a switch of 4 NPUs."""
    for rank in range(ranks):
        write_trace(tmp_path / f"t.{rank}.et", et.GlobalMetadata(), nodes)
    path = tmp_path / "study.yaml"
    path.write_text(
        f"name: chakra\nworkload: {{kind: chakra, path: {tmp_path / 't'}}}\nsystem: {{algorithm: ring}}\n"
        "network:\n  backend: analytical\n  topology: [{kind: switch, size: 4, bandwidth: 50GB/s, latency: 500ns}]\n"
    )
    return path


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize(
    ("ranks", "nodes", "message"),
    [
        (
            2,
            [node(1, 3), node(2, 1), node(3, 2)],
            "node 1: is part of a dependency cycle: 1 -> 3 -> 2 -> 1",  # by id: a trace's names are its own
        ),
        (2, [node(1), node(2, 9)], "node 2: depends on node 9, which is not in the graph"),
        (8, [node(1)], "workload needs 8 NPUs but the topology has 4"),
        (2, [node(1, pg_name="tp")], "t.0.et: node 1: pg_name 'tp' is not defined: no communicator groups"),
    ],
)
def test_bad_traces_in_a_study_are_one_error(
    run_cli: RunCli, tmp_path: Path, command: str, ranks: int, nodes: list[et.Node], message: str
) -> None:
    code, out, err = run_cli(command, str(study(tmp_path, ranks, nodes)))
    assert code == 2 and not out and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_truncated_trace_in_a_study_is_one_error(run_cli: RunCli, tmp_path: Path, command: str) -> None:
    path = study(tmp_path, 2, [node(1), node(2, 1)])
    trace = tmp_path / "t.1.et"
    trace.write_bytes(trace.read_bytes()[:-2])
    code, out, err = run_cli(command, str(path))
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith(f"error: {trace}: truncated record at byte")
