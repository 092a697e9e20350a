"""Roofline plots: the ceilings, slopes and markers computed for a device (always tested), the drawing itself
(when matplotlib, the ``plot`` extra, is installed), and the ``stratasim roofline`` options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from stratasim.cli import roofline
from stratasim.compute_layer.device_presets import PRESETS as FITTED
from stratasim.compute_layer.devices import datasheet
from stratasim.kernel.errors import StrataSimError
from stratasim.report import roofline_plot
from stratasim.report.roofline_plot import Ceiling, RooflinePoint, Slope, roofline_chart
from stratasim.v1 import compute_pb2
from tests.helpers import RunCli

# The datasheet roofline: these tests check the roofline's arithmetic; the presets' fitted efficiency models are
# tested in tests/report/test_calibration_line.py.
PRESETS = {name: datasheet(dev) for name, dev in FITTED.items()}

# 4096³ BF16 GEMM on an H100: 137438953472 FLOPs in 138911415 ps, 100663296 DRAM and 1107296256 SRAM bytes.
SQUARE = RooflinePoint(
    "square", 2 * 4096**3, 3 * 4096**2 * 2, 138_911_415, {"dram": 3 * 4096**2 * 2, "sram": 33 * 4096**2 * 2}
)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    roofline.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_ceilings_group_dtypes_by_peak_and_slopes_follow_the_levels() -> None:
    chart = roofline_chart(PRESETS["h100"], [])
    assert chart.ceilings == (
        Ceiling("fp8/int8", 1978.9e12),
        Ceiling("fp16/bf16", 989.4e12),
        Ceiling("tf32", 494.7e12),
        Ceiling("fp64/fp32", 66.9e12),
    )
    assert chart.slopes == (Slope("dram", 3.35e12), Slope("sram", 5120 * 1830e6))
    # TPU v4's CMEM has no published bandwidth: no SRAM slope.
    assert [slope.level for slope in roofline_chart(PRESETS["tpuv4"], []).slopes] == ["dram"]


def test_calibration_lowers_the_roofs() -> None:
    calibration = compute_pb2.Calibration(compute_efficiency=0.5, memory_efficiency=0.8)
    chart = roofline_chart(PRESETS["a100"], [], calibration)
    assert chart.ceilings[1] == Ceiling("fp16/bf16", 156e12)
    assert chart.slopes[0] == Slope("dram", 2039e9 * 0.8)
    assert chart.slopes[1] == Slope("sram", 5120 * 1410e6)  # calibration is of HBM only


def test_one_marker_per_level_at_the_achieved_throughput() -> None:
    chart = roofline_chart(
        PRESETS["h100"], [SQUARE, RooflinePoint("empty", 0, 10, 5), RooflinePoint("plain", 100, 50, 1000)]
    )
    achieved = 2 * 4096**3 * 10**12 / 138_911_415
    assert [(m.name, m.level) for m in chart.markers] == [("square", "dram"), ("square", "sram"), ("plain", "dram")]
    assert chart.markers[0].intensity == pytest.approx(4096 / 3) and chart.markers[0].flops_per_s == achieved
    assert chart.markers[1].intensity == pytest.approx(4096 / 33) and chart.markers[1].flops_per_s == achieved
    # Without traffic, the point's bytes count as DRAM bytes: 100 FLOPs / 50 bytes, 100 FLOPs in 1 ns.
    assert (chart.markers[2].intensity, chart.markers[2].flops_per_s) == (2.0, 1e11)
    assert chart.skipped == ("empty",)


def test_points_come_from_a_report(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    rows = [
        {
            "names": ["qkv", "qkv'"],
            "kind": "gemm",
            "flops": 10,
            "bytes": 4,
            "duration_ps": 3,
            "count": 2,
            "traffic": {"dram": 4, "sram": 8},
        },
        {"name": "add", "flops": 1, "bytes": 6, "duration_ps": 2},
    ]
    path.write_text(json.dumps({"operators": rows}), encoding="utf-8")
    assert roofline_plot.points_from_report(path) == [
        RooflinePoint("qkv, qkv'", 10, 4, 3, {"dram": 4, "sram": 8}),
        RooflinePoint("add", 1, 6, 2, {}),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"npus": 8}, "has no 'operators' list"),
        ({"operators": [{"names": ["x"], "flops": 1}]}, r"operators\[0\] lacks a number for 'bytes'"),
        ({"operators": ["x"]}, r"operators\[0\] is not an object"),
    ],
)
def test_bad_reports_are_one_clear_error(tmp_path: Path, content: object, message: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(StrataSimError, match=message):
        roofline_plot.points_from_report(path)
    with pytest.raises(StrataSimError, match="cannot read the report"):
        roofline_plot.points_from_report(tmp_path / "missing.json")


def test_cli_needs_something_to_plot_and_a_known_format(tmp_path: Path) -> None:
    with pytest.raises(StrataSimError, match="nothing to plot"):
        roofline_plot.run_from_args(_args("--device", "h100", "-o", str(tmp_path / "r.png")))
    with pytest.raises(StrataSimError, match=r"name it \*.png or \*.svg"):
        roofline_plot.run_from_args(
            _args("--device", "h100", "--op", "gemm:M=8,K=8,N=8", "-o", str(tmp_path / "r.pdf"))
        )
    with pytest.raises(StrataSimError, match="expected KIND:KEY=VALUE"):
        roofline_plot.run_from_args(_args("--device", "h100", "--op", "gemm:M8", "-o", str(tmp_path / "r.png")))
    with pytest.raises(StrataSimError, match="cannot compute in fp8"):
        roofline_plot.run_from_args(
            _args("--device", "a100", "--op", "gemm:M=8,K=8,N=8,dtype=fp8", "-o", str(tmp_path / "r.png"))
        )
    with pytest.raises(StrataSimError, match=r"calibration: .*compute_efficiency must be in \(0, 1\]"):
        roofline_plot.run_from_args(
            _args(
                "--device",
                "a100",
                "--op",
                "gemm:M=8,K=8,N=8",
                "--compute-efficiency",
                "2",
                "-o",
                str(tmp_path / "r.png"),
            )
        )


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_is_written_by_extension(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "operators": [
                    {"names": ["g"], "flops": 2 * 4096**3, "bytes": 3 * 4096**2 * 2, "duration_ps": 138_911_415}
                ]
            }
        ),
        encoding="utf-8",
    )
    out = tmp_path / "plots" / f"roofline{suffix}"
    args = _args(
        "--device",
        "h100",
        "--from-report",
        str(report),
        "--op",
        "gemm:M=1,K=8192,N=8192",
        "--op",
        "elementwise:shape=1048576",
        "-o",
        str(out),
    )
    assert roofline_plot.run_from_args(args) == 0
    assert "3 operators on h100" in capsys.readouterr().out
    written = out.read_bytes()
    assert written.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in written


def test_the_command_plots_a_described_device(tmp_path: Path, run_cli: RunCli) -> None:
    pytest.importorskip("matplotlib")
    chip = tmp_path / "chip.yaml"
    chip.write_text("{name: mychip, peak: {bf16: 400TFLOPS}, memory_bandwidth: 2TB/s, memory_capacity: 64GiB}\n")
    out = tmp_path / "r.svg"
    for device in ("{preset: h100, memory_bandwidth: 4TB/s}", f"{{file: {chip}}}"):
        code, stdout, stderr = run_cli("roofline", "--device", device, "--op", "gemm:M=64,K=64,N=64", "-o", str(out))
        assert code == 0, stderr
        assert "1 operators on" in stdout and b"<svg" in out.read_bytes()
    code, _, stderr = run_cli("roofline", "--device", "{peak: {bf16: 1TFLOPS}}", "--op", "gemm:M=8,K=8,N=8", "-o", "x")
    assert code != 0 and "stratasim roofline" in stderr and "--device" in stderr and "Traceback" not in stderr
