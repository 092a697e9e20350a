"""``{generator: accelerator}``: every configuration of the base study's Timeloop-style accelerator over PE array
shapes, dataflows and buffer sizes, and what it skips."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stratasim.cli import main
from stratasim.explore import ResultStore, expand, load_sweep, run_sweep
from stratasim.explore.accelerators import array_shapes
from stratasim.explore.space import resolve
from stratasim.kernel.errors import ConfigError
from tests.compute_layer.test_described_accelerator import WHOLE_GEMMINI

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
compute: {backend: timeloop, device: {preset: systolic-32x32-os}}
"""
DEVICE = "compute.device."
KEPT = "levels.sram.partitions.weights"


def _sweep(tmp_path: Path, space: str, base: str = BASE) -> Path:
    (tmp_path / "base.yaml").write_text(base, encoding="utf-8")
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: base.yaml\nspace:\n{space}", encoding="utf-8")
    return path


def _arrays(tmp_path: Path, space: str) -> list[tuple[int, int, str | None]]:
    points = resolve(load_sweep(_sweep(tmp_path, space))).generated["acc"].points
    return [(point[DEVICE + "pe_rows"], point[DEVICE + "pe_cols"], point.get(DEVICE + "dataflow")) for point in points]


def test_every_factorisation_of_each_pe_count_times_every_dataflow(tmp_path: Path) -> None:
    # 64 = 2^6 has 7 divisors, so 7 shapes (1x64 ... 64x1); 12 = 2^2 * 3 has (2 + 1)(1 + 1) = 6.
    assert len(_arrays(tmp_path, "  acc: {generator: accelerator, pes: [64, 12]}\n")) == 7 + 6
    arrays = _arrays(tmp_path, "  acc: {generator: accelerator, pes: [64, 12], dataflow: [os, ws, is]}\n")
    assert len(arrays) == (7 + 6) * 3 == 39 == len(set(arrays))
    assert all(rows * cols in (64, 12) for rows, cols, _ in arrays)
    assert array_shapes(12) == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]


def test_rows_by_cols_grid_and_buffer_sizes(tmp_path: Path) -> None:
    space = (
        "  acc: {generator: accelerator, rows: [16, 32, 64], cols: [32, 128], dataflow: [ws],\n"
        "        buffers: {sram: [4096, 8192, 16384], sram.weights: [1024, 2048]}}\n"
    )
    points = resolve(load_sweep(_sweep(tmp_path, space))).generated["acc"].points
    assert len(points) == 3 * 2 * 1 * 3 * 2
    assert points[0] == {
        DEVICE + "pe_rows": 16,
        DEVICE + "pe_cols": 32,
        DEVICE + "dataflow": "ws",
        DEVICE + "levels.sram.words": 4096,
        DEVICE + "levels.sram.partitions.weights": 1024,
    }
    only_buffers = "  acc: {generator: accelerator, buffers: {sram.outputs: [8]}}\n"  # the base's array
    assert resolve(load_sweep(_sweep(tmp_path, only_buffers))).generated["acc"].points == [
        {DEVICE + "levels.sram.partitions.outputs": 8}
    ]


def test_arrays_beyond_max_aspect_never_appear_and_are_counted(tmp_path: Path) -> None:
    # 256's shapes: 1x256, 2x128, 4x64, 8x32, 16x16 and their transposes (9 in all); within an aspect of 4: 8x32,
    # 16x16, 32x8; so 6 shapes, 18 configurations with 3 dataflows, skipped.
    entry = "  acc: {generator: accelerator, pes: [256], dataflow: [os, ws, is], max_aspect: 4}\n"
    arrays = _arrays(tmp_path, entry)
    assert {(rows, cols) for rows, cols, _ in arrays} == {(8, 32), (16, 16), (32, 8)} and len(arrays) == 9
    space = resolve(load_sweep(_sweep(tmp_path, entry)))
    assert space.generated["acc"].skipped == {"arrays longer than max_aspect (4) times their width": 18}
    assert space.notes() == [
        "space.acc: 9 accelerators; skipped 18: 18 arrays longer than max_aspect (4) times their width"
    ]


def test_what_the_model_refuses_is_skipped_by_its_reason(tmp_path: Path) -> None:
    """Eyeriss's row-stationary array fixes its unrolling: the model refuses a systolic dataflow on it."""
    eyeriss = BASE.replace("{preset: systolic-32x32-os}", "{preset: eyeriss-like}")
    space = "  acc: {generator: accelerator, rows: [12, 24], cols: [14], dataflow: [os, ws]}\n"
    with pytest.raises(ConfigError) as caught:
        resolve(load_sweep(_sweep(tmp_path, space, eyeriss)))
    ((key, problem),) = caught.value.problems
    assert key == "space.acc" and problem == (
        "nothing to try: 0 accelerators; skipped 4: 4 accelerator 'eyeriss-like': "
        "a systolic dataflow fixes the unrolling itself: give dataflow or "
        "unrolls, not both"
    )
    assert (
        len(
            resolve(load_sweep(_sweep(tmp_path, space.replace(", dataflow: [os, ws]", ""), eyeriss)))
            .generated["acc"]
            .points
        )
        == 2
    )
    # The backing store must stay unbounded: bounding it is refused too.
    with pytest.raises(
        ConfigError,
        match="skipped 2: 2 accelerator 'systolic-32x32-os': the last level 'dram' must "
        "keep every operand and be unbounded",
    ):
        resolve(load_sweep(_sweep(tmp_path, "  acc: {generator: accelerator, buffers: {dram: [8, 16]}}\n")))


def test_a_bigger_array_is_never_slower_on_a_large_gemm(tmp_path: Path) -> None:
    """With the same buffers and dataflow, an array at least as big in both directions takes at most as long on a
    2048x1024x2048 GEMM, and 64x64 is faster than 16x16 (fewer folds over M, K and N); with the same array, a
    bigger weight buffer never costs more energy (it refetches fewer weights from DRAM)."""
    space = (
        "  acc: {generator: accelerator, rows: [16, 32, 64], cols: [16, 64], dataflow: [os, ws, is],\n"
        "        buffers: {sram.weights: [1024, 65536]}}\n"
    )
    sweep = load_sweep(_sweep(tmp_path, space))
    assert len(expand(sweep)) == 3 * 2 * 3 * 2
    outcome = run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()), workers=1)
    assert all(r.status == "done" for r in outcome.trials), [r.error for r in outcome.trials if r.error][:1]
    assert outcome.notes == ("space.acc: 36 accelerators",)
    runs = {
        tuple(trial.params[DEVICE + key] for key in ("pe_rows", "pe_cols", "dataflow", KEPT)): trial.metrics
        for trial in outcome.trials
    }
    for (rows, cols, flow, kept), metrics in runs.items():
        for (other_rows, other_cols, other_flow, other_kept), other in runs.items():
            if (other_flow, other_kept) == (flow, kept) and other_rows >= rows and other_cols >= cols:
                assert other["compute_time_ns"] <= metrics["compute_time_ns"]
        assert (
            runs[(rows, cols, flow, 65536)]["compute_energy_pj"] <= runs[(rows, cols, flow, 1024)]["compute_energy_pj"]
        )
    for flow in ("os", "ws", "is"):
        assert runs[(64, 64, flow, 65536)]["compute_time_ns"] < runs[(16, 16, flow, 65536)]["compute_time_ns"]


def test_a_whole_base_accelerator_sweeps_as_its_preset(tmp_path: Path) -> None:
    """Gemmini written out whole, without ``preset:``: its levels are a list, so the points set them by place
    (``levels.2.words``), and every point prices exactly as the same point on ``{preset: gemmini}``."""
    space = (
        "  acc: {generator: accelerator, pes: [256], dataflow: [os, ws], max_aspect: 4,\n"
        "        buffers: {scratchpad: [65536, 262144], accumulator.outputs: [1024, 16384]}}\n"
    )
    study = yaml.safe_load(BASE)
    study["compute"]["device"] = yaml.safe_load(WHOLE_GEMMINI)
    whole = yaml.safe_dump(study)
    preset = BASE.replace("systolic-32x32-os", "gemmini")
    metrics = []
    for name, base in [("whole", whole), ("preset", preset)]:
        folder = tmp_path / name
        folder.mkdir()
        sweep = load_sweep(_sweep(folder, space, base))
        outcome = run_sweep(sweep, ResultStore(folder / "s.db", sweep.section.model_dump_json()), workers=1)
        assert all(r.status == "done" for r in outcome.trials), [r.error for r in outcome.trials if r.error][:1]
        metrics.append(
            [(trial.metrics["compute_time_ns"], trial.metrics["compute_energy_pj"]) for trial in outcome.trials]
        )
        if name == "whole":
            assert outcome.trials[0].params == {
                DEVICE + "pe_rows": 8,
                DEVICE + "pe_cols": 32,
                DEVICE + "dataflow": "os",
                DEVICE + "levels.2.words": 65536,
                DEVICE + "levels.1.partitions.outputs": 1024,
            }
    assert len(metrics[0]) == 3 * 2 * 2 * 2 and metrics[0] == metrics[1]
    assert len(set(metrics[0])) > 1  # the keys reach the accelerator


@pytest.mark.parametrize(
    ("space", "problem"),
    [
        ("  acc: {generator: accelerator}\n", "space.acc: nothing to vary: give rows and cols, pes, dataflow"),
        ("  acc: {generator: accelerator, pes: [64], rows: [8]}\n", "space.acc: give the PE array either as rows"),
        ("  acc: {generator: accelerator, rows: [8]}\n", "space.acc: rows and cols go together; cols is missing"),
        ("  acc: {generator: accelerator, pes: [64, 0]}\n", "space.acc.pes[1]: input should be greater than"),
        ("  acc: {generator: accelerator, rows: [8], cols: [four]}\n", "space.acc.cols[0]: input should be a valid"),
        ("  acc: {generator: accelerator, pes: []}\n", "space.acc.pes: list should have at least 1 item"),
        ("  acc: {generator: accelerator, dataflow: [rs]}\n", "space.acc.dataflow[0]: input should be"),
        ("  acc: {generator: accelerator, pes: [64], max_aspect: 0.5}\n", "space.acc.max_aspect: input should be"),
        ("  acc: {generator: accelerator, buffers: {sram: [0]}}\n", "space.acc.buffers.sram[0]: input should be"),
        (
            "  acc: {generator: accelerator, buffers: {sramm: [4]}}\n",
            "space.acc.buffers.sramm: the base accelerator has no level 'sramm'; its levels are registers, sram, dram",
        ),
        (
            "  acc: {generator: accelerator, buffers: {sram.input: [4]}}\n",
            "space.acc.buffers.sram.input: unknown operand 'input'; expected inputs, weights, outputs",
        ),
        ("  acc: {generator: accelerator, buffers: {a.b.c: [4]}}\n", "space.acc.buffers.a.b.c: "),
        ("  acc: {generator: accelerator, pes: [64], buffer: 1MiB}\n", "space.acc.buffer: unknown key"),
        (
            "  acc: {generator: accelerator, pes: [64]}\n  compute.device.pe_rows: [8]\n",
            "space.compute.device.pe_rows: sets compute.device.pe_rows, which space.acc sets too",
        ),
    ],
)
def test_a_bad_option_is_one_error_with_its_dotted_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], space: str, problem: str
) -> None:
    path = _sweep(tmp_path, space)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err and "Traceback" not in err
    assert err.count("\n  ") == 1  # one problem


def test_the_base_study_must_describe_a_timeloop_accelerator(tmp_path: Path) -> None:
    named = BASE.replace("{preset: systolic-32x32-os}", "systolic-32x32-os")
    mixed = named.replace("device: systolic-32x32-os}", "device: systolic-32x32-os, per_kind: {elementwise: roofline}}")
    for base, problem in [
        (mixed, "every backend of the base study's compute section must be timeloop, not roofline"),
        (named, "write the base study's device as a mapping, {preset: systolic-32x32-os}"),
    ]:
        with pytest.raises(ConfigError) as caught:
            resolve(load_sweep(_sweep(tmp_path, "  acc: {generator: accelerator, pes: [64]}\n", base)))
        ((key, message),) = caught.value.problems
        assert key == "space.acc.generator" and problem in message, message


def test_a_study_takes_a_systolic_array_of_any_shape_and_no_other_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The timeloop backend lists only its presets; the run's device check accepts what it describes."""
    path = tmp_path / "base.yaml"
    path.write_text(BASE.replace("{preset: systolic-32x32-os}", "systolic-32x32-os"), encoding="utf-8")
    assert main(["check", str(path), "--set", "compute.device=systolic-48x16-ws"]) == 0
    assert main(["check", str(path), "--set", "compute.device=systolic-48x16-rs"]) == 2
    err = capsys.readouterr().err
    assert "compute.device: timeloop has no device 'systolic-48x16-rs'; available: eyeriss-like" in err
