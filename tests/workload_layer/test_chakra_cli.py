"""``stratasim trace inspect`` and ``stratasim trace convert`` on the reference Chakra traces and on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim import cli
from stratasim.chakra import et_def_pb2 as et
from workload_layer.chakra import read_trace, to_graph, trace_files, write_trace

WORKLOADS = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "astra-sim-inputs" / "workload"
needs_traces = pytest.mark.skipif(not WORKLOADS.is_dir(), reason=f"reference traces not found at {WORKLOADS}")
RESNET = WORKLOADS / "e2e_text_converted" / "Resnet50_DataParallel_8npus" / "Resnet50_DataParallel"
CUSTOM = WORKLOADS / "custom_collective_ring_allreduce_8npus_1MB" / "custom_allreduce"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@needs_traces
def test_inspect_a_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "inspect", str(RESNET))
    assert code == 0 and not err
    assert "ranks: 8" in out and "COMP_NODE: 1288" in out and "ALL_REDUCE: 432" in out
    assert "compute: " in out


@needs_traces
def test_inspect_one_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", f"{CUSTOM}.3.et")
    assert code == 0
    assert "ranks: 1" in out and "COMM_SEND_NODE: 14" in out and "point-to-point sends: 1835008 bytes" in out


@needs_traces
def test_convert_there_and_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "convert", str(CUSTOM), str(tmp_path / "ir"), "--to", "stratasim")
    assert code == 0 and "wrote 8 files" in out and (tmp_path / "ir.7.pb").is_file()
    code, out, _ = run(capsys, "convert", str(tmp_path / "ir"), str(tmp_path / "back"), "--to", "chakra")
    assert code == 0
    for rank, (original, back) in enumerate(zip(trace_files(CUSTOM), trace_files(tmp_path / "back"), strict=True)):
        assert to_graph(read_trace(original)[1], rank, 8) == to_graph(read_trace(back)[1], rank, 8)
    code, out, _ = run(capsys, "inspect", str(tmp_path / "ir"))
    assert code == 0 and "COMM_RECV_NODE: 112" in out


def test_bad_input_is_one_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "inspect", str(tmp_path / "nothing"))
    assert code == 2 and not out and err.startswith("error: no Chakra") and err.count("\n") == 1
    (tmp_path / "bad.0.et").write_bytes(b"\x05abc")
    code, _, err = run(capsys, "inspect", str(tmp_path / "bad"))
    assert code == 2 and "bad.0.et: truncated record at byte 0" in err
    code, _, err = run(capsys, "convert", str(tmp_path / "bad"), str(tmp_path / "out"), "--to", "stratasim")
    assert code == 2 and "truncated record" in err
    code, _, err = run(capsys, "convert", str(tmp_path / "bad"), str(tmp_path / "out"), "--to", "chakra")
    assert code == 2 and "error: no Chakra traces match" in err and ".<rank>.pb" in err
    write_trace(tmp_path / "ok.0.et", et.GlobalMetadata(), [et.Node(id=1, type=et.COMP_NODE)])
    code, _, err = run(capsys, "convert", str(tmp_path / "ok"), str(tmp_path / "missing" / "x"), "--to", "stratasim")
    assert code == 2 and "cannot write the trace" in err
    assert run(capsys, "convert", "a", "b")[0] == 2  # --to is required
