"""The pictures ``stratasim run --out`` draws: valid PNGs of a readable size, NPUs and phases aggregated so that
thousands stay a few dozen bars, and the JSON still written (with one note) when matplotlib is missing."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from stratasim.report.figures import MAX_BARS, _npu_bars, _phase_delays, busy_stretches
from stratasim.system_layer.result import CollectiveStats, NpuStats, SimulationResult
from tests.helpers import RunCli

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def run_out(run_cli: RunCli, example: str, out: Path, *extra: str) -> tuple[str, str]:
    code, out_text, err = run_cli("run", str(ROOT / "examples" / example), "--quiet", "--out", str(out), *extra)
    assert code == 0, err
    return out_text, err


@pytest.mark.parametrize(
    ("example", "pictures"),
    [
        ("quickstart.yaml", {"time_breakdown", "collective_delays", "timeline"}),
        ("transformer.yaml", {"time_breakdown", "collective_delays", "timeline"}),
        ("torus_allreduce.yaml", {"time_breakdown", "collective_delays", "link_utilisation", "timeline"}),
    ],
)
def test_out_draws_valid_pngs_of_a_readable_size(
    run_cli: RunCli, tmp_path: Path, example: str, pictures: set[str]
) -> None:
    pytest.importorskip("matplotlib")
    out, _ = run_out(run_cli, example, tmp_path)
    assert {path.stem for path in tmp_path.glob("*.png")} == pictures
    for name in pictures:
        path = tmp_path / f"{name}.png"
        width, height = png_size(path)
        assert 600 <= width <= 1200 and 150 <= height <= 1200, (name, width, height)
        assert path.stat().st_size < 200_000
        assert str(path) in out  # listed on the "wrote ..." line
    assert (tmp_path / "report.json").exists() and (tmp_path / "trace.json").exists()


def test_no_pictures_writes_the_json_only(run_cli: RunCli, tmp_path: Path) -> None:
    out, err = run_out(run_cli, "quickstart.yaml", tmp_path, "--no-pictures")
    assert not list(tmp_path.glob("*.png")) and (tmp_path / "report.json").exists() and "note:" not in err


def _npu(npu: int, compute: int, by_kind: tuple[tuple[str, int], ...]) -> NpuStats:
    exposed = sum(ps for _, ps in by_kind)
    return NpuStats(npu, compute + exposed, compute, exposed, exposed, exposed_comm_ps_by_kind=by_kind)


def _result(per_npu: list[NpuStats], collectives: list[CollectiveStats] | None = None) -> SimulationResult:
    total = max(stats.finish_ps for stats in per_npu)
    return SimulationResult(total, len(per_npu), collectives or [], tuple(per_npu), (), 0)


def test_npus_with_identical_rows_share_a_bar() -> None:
    # Rows are (compute, exposed dp, exposed tp, waiting, idle): idle = the last finish (1000 + 300) minus the NPU's
    # own.
    per_npu = [_npu(i, 1000, (("dp", 100), ("tp", 200))) if i % 2 else _npu(i, 1000, (("dp", 300),)) for i in range(8)]
    labels, rows = _npu_bars(_result(per_npu), ["dp", "tp"])
    assert labels == ["NPU 0, 2, 4, … (4 NPUs)", "NPU 1, 3, 5, … (4 NPUs)"]
    assert rows.tolist() == [[1000, 300, 0, 0, 0], [1000, 100, 200, 0, 0]]


def test_thousands_of_distinct_npus_become_means_of_consecutive_runs() -> None:
    per_npu = [_npu(i, 1000 + i, (("dp", 10),)) for i in range(4096)]
    labels, rows = _npu_bars(_result(per_npu), ["dp"])
    assert len(labels) == MAX_BARS and rows.shape == (MAX_BARS, 4)
    assert labels[0] == "mean of NPU 0-85" and labels[-1] == "mean of NPU 4011-4095"
    assert rows[0][0] == pytest.approx(1000 + 85 / 2)  # mean compute of NPUs 0..85 is 1000 + 42.5


def test_phase_delays_are_weighted_by_how_many_collectives_ran_them() -> None:
    # Two collectives of one kind (queue 100, network 300 in phase 0) and one of another (queue 400, network 0):
    # same kind and phase, so the means are (2*100 + 400)/3 = 200 and (2*300 + 0)/3 = 200.
    def stats(number: int, queue: int, network: int) -> CollectiveStats:
        return CollectiveStats(number, "all_reduce", 1024, 8, 0, 1000, (queue,), (network,), (0,), ("all_reduce",))

    delays = _phase_delays(_result([_npu(0, 1, ())], [stats(0, 100, 300), stats(1, 100, 300), stats(2, 400, 0)]))
    assert delays == {"all_reduce ×8 · phase 0: all_reduce dim 0": (200.0, 200.0, 3)}


def test_without_matplotlib_out_writes_the_json_and_says_what_to_install(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in sys.modules if name == "matplotlib" or name.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    out, err = run_out(run_cli, "quickstart.yaml", tmp_path, "--json")
    assert json.loads(out)["npus"] == 32  # stdout is still the report alone
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.json", "trace.json"]
    notes = [line for line in err.splitlines() if "matplotlib" in line]
    assert notes == ["note: the pictures need matplotlib: pip install 'stratasim[plot]'"]


def test_busy_stretches_merge_what_a_pixel_cannot_tell_apart() -> None:
    starts, ends = np.array([50, 0, 12, 100, 101]), np.array([60, 10, 20, 105, 130])
    assert busy_stretches(starts, ends, gap_ps=0) == [(0, 10), (12, 8), (50, 10), (100, 30)]
    assert busy_stretches(starts, ends, gap_ps=2) == [(0, 20), (50, 10), (100, 30)]  # 10 to 12: within 2 ps
    assert busy_stretches(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 5) == []


def test_no_trace_no_timeline(run_cli: RunCli, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run_out(run_cli, "quickstart.yaml", tmp_path, "--trace-detail", "none")
    assert {path.stem for path in tmp_path.glob("*.png")} == {"time_breakdown", "collective_delays"}
