"""``{generator: accelerator}``: every systolic array of the Timeloop-style model over PE array shapes and
dataflows, and what it skips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stratasim.cli import main
from stratasim.explore import ResultStore, expand, load_sweep, run_sweep
from stratasim.explore.accelerators import array_shapes
from stratasim.explore.space import resolve
from stratasim.kernel.errors import ConfigError

BASE = """
name: gemm
workload:
  kind: training_loop
  passes: 1
  dtype: bf16
  layers: [{name: block, forward: {gemm: [2048, 1024, 2048]}}]
system: {algorithm: ring}
network:
  backend: analytical
  topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: timeloop, device: systolic-32x32-os}
"""
NAME = re.compile(r"systolic-(\d+)x(\d+)-(os|ws|is)")


def _sweep(tmp_path: Path, space: str, base: str = BASE) -> Path:
    (tmp_path / "base.yaml").write_text(base, encoding="utf-8")
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: base.yaml\nspace:\n{space}", encoding="utf-8")
    return path


def _arrays(tmp_path: Path, space: str) -> list[tuple[int, int, str]]:
    points = resolve(load_sweep(_sweep(tmp_path, space))).generated["acc"].points
    assert all(set(point) == {"compute.device"} for point in points)
    arrays = []
    for point in points:
        match = NAME.fullmatch(point["compute.device"])
        assert match is not None
        arrays.append((int(match[1]), int(match[2]), match[3]))
    return arrays


def test_every_factorisation_of_each_pe_count_times_every_dataflow(tmp_path: Path) -> None:
    # 64 = 2^6 has 7 divisors, so 7 shapes (1x64 ... 64x1); 12 = 2^2 * 3 has (2 + 1)(1 + 1) = 6; 3 dataflows each.
    arrays = _arrays(tmp_path, "  acc: {generator: accelerator, pes: [64, 12]}\n")
    assert len(arrays) == (7 + 6) * 3 == 39 == len(set(arrays))
    assert all(rows * cols in (64, 12) for rows, cols, _ in arrays)
    assert array_shapes(12) == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]


def test_rows_by_cols_grid_and_chosen_dataflows(tmp_path: Path) -> None:
    arrays = _arrays(tmp_path, "  acc: {generator: accelerator, rows: [16, 32, 64], cols: [32, 128], dataflow: [ws]}\n")
    assert arrays == [(rows, cols, "ws") for rows in (16, 32, 64) for cols in (32, 128)]


def test_arrays_beyond_max_aspect_never_appear_and_are_counted(tmp_path: Path) -> None:
    # 256's shapes: 1x256, 2x128, 4x64, 8x32, 16x16 and their transposes (9 in all); within an aspect of 4: 8x32,
    # 16x16, 32x8; so 6 shapes, 18 configurations with 3 dataflows, skipped.
    entry = "  acc: {generator: accelerator, pes: [256], max_aspect: 4}\n"
    arrays = _arrays(tmp_path, entry)
    assert {(rows, cols) for rows, cols, _ in arrays} == {(8, 32), (16, 16), (32, 8)} and len(arrays) == 9
    space = resolve(load_sweep(_sweep(tmp_path, entry)))
    assert space.generated["acc"].skipped == {"arrays longer than max_aspect (4) times their width": 18}
    assert space.notes() == ["space.acc: 9 accelerators; skipped 18: 18 arrays longer than max_aspect (4) times "
                             "their width"]  # fmt: skip


def test_a_bigger_array_is_never_slower_on_a_large_gemm(tmp_path: Path) -> None:
    """Same buffers (SCALE-Sim's 64 kB each) and dataflow: an array at least as big in both directions takes at
    most as long on a 2048x1024x2048 GEMM, and 64x64 is faster than 16x16 (fewer folds over M, K and N)."""
    space = "  acc: {generator: accelerator, rows: [16, 32, 64], cols: [16, 64]}\n  system.splits: [1]\n"
    sweep = load_sweep(_sweep(tmp_path, space))
    assert len(expand(sweep)) == 3 * 2 * 3
    outcome = run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()), workers=1)
    assert all(r.status == "done" for r in outcome.trials), [r.error for r in outcome.trials if r.error][:1]
    assert outcome.notes == ("space.acc: 18 accelerators",)
    times: dict[tuple[int, int, str], float] = {}
    for trial in outcome.trials:
        match = NAME.fullmatch(trial.params["compute.device"])
        assert match is not None
        times[(int(match[1]), int(match[2]), match[3])] = trial.metrics["compute_time_ns"]
    for (rows, cols, flow), time in times.items():
        for (bigger_rows, bigger_cols, other), other_time in times.items():
            if other == flow and bigger_rows >= rows and bigger_cols >= cols:
                assert other_time <= time, ((rows, cols, flow), (bigger_rows, bigger_cols))
    assert all(times[(64, 64, flow)] < times[(16, 16, flow)] for flow in ("os", "ws", "is"))


@pytest.mark.parametrize(
    ("space", "problem"),
    [
        ("  acc: {generator: accelerator}\n", "space.acc: give the PE array either as rows and cols lists or as pes"),
        ("  acc: {generator: accelerator, pes: [64], rows: [8]}\n", "space.acc: give the PE array either as rows"),
        ("  acc: {generator: accelerator, rows: [8]}\n", "space.acc: rows and cols go together; cols is missing"),
        ("  acc: {generator: accelerator, pes: [64, 0]}\n", "space.acc.pes[1]: input should be greater than"),
        ("  acc: {generator: accelerator, rows: [8], cols: [four]}\n", "space.acc.cols[0]: input should be a valid"),
        ("  acc: {generator: accelerator, pes: []}\n", "space.acc.pes: list should have at least 1 item"),
        ("  acc: {generator: accelerator, pes: [64], dataflow: [rs]}\n", "space.acc.dataflow[0]: input should be"),
        ("  acc: {generator: accelerator, pes: [64], max_aspect: 0.5}\n", "space.acc.max_aspect: input should be"),
        ("  acc: {generator: accelerator, pes: [64], buffer: 1MiB}\n", "space.acc.buffer: unknown key"),
        ("  acc: {generator: accelerator, pes: [64]}\n  compute.device: [gemmini]\n",
         "space.compute.device: sets compute.device, which space.acc sets too"),
    ],
)  # fmt: skip
def test_a_bad_option_is_one_error_with_its_dotted_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], space: str, problem: str
) -> None:
    path = _sweep(tmp_path, space)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err and "Traceback" not in err
    assert err.count("\n  ") == 1  # one problem


def test_the_base_study_must_price_everything_on_timeloop(tmp_path: Path) -> None:
    mixed = BASE.replace("{backend: timeloop, device: systolic-32x32-os}",
                         "{backend: timeloop, device: systolic-32x32-os, per_kind: {elementwise: roofline}}")  # fmt: skip
    with pytest.raises(ConfigError, match="every backend of the base study's compute section must be timeloop, "
                                          "not roofline") as caught:  # fmt: skip
        resolve(load_sweep(_sweep(tmp_path, "  acc: {generator: accelerator, pes: [64]}\n", mixed)))
    assert [key for key, _ in caught.value.problems] == ["space.acc.generator"]


def test_a_study_takes_a_systolic_array_of_any_shape_and_no_other_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The timeloop backend lists only its presets; the run's device check accepts what it describes."""
    path = tmp_path / "base.yaml"
    path.write_text(BASE, encoding="utf-8")
    assert main(["check", str(path), "--set", "compute.device=systolic-48x16-ws"]) == 0
    assert main(["check", str(path), "--set", "compute.device=systolic-48x16-rs"]) == 2
    err = capsys.readouterr().err
    assert "compute.device: timeloop has no device 'systolic-48x16-rs'; available: eyeriss-like" in err
