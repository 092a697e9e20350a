"""``stratasim validate``: the short form passes; a moved number fails, naming its row; the cases and their inputs
ship in the wheel; the shipped inputs are the repository's own files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from stratasim.kernel.errors import StrataSimError
from stratasim.validate import cases as validate_cases
from stratasim.validate import load_cases, validate
from stratasim.validate.cases import DATA, HOME, Check
from stratasim.validate.formula import evaluate, variables
from tests.helpers import RunCli
from tools import installed_layout
from tools.sync_validate_data import ROOT, copies


def test_the_short_form_passes(run_cli: RunCli) -> None:
    code, out, err = run_cli("validate")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["row", "expected", "got", "error", "tolerance", "result"]
    suites = {line.split(" / ")[0] for line in lines[1:] if " / " in line}
    assert suites == {"megatron", "calibration", "astra_sim", "closed_forms", "scalesim", "operators"}
    assert {line.split(" / ")[1].split()[0] for line in lines if line.startswith("operators / ")} == {"h100", "h200"}
    rows = [line for line in lines if " / " in line]
    assert "megatron / gpt_18b / total_time_ps" in out and lines[-1] == f"{len(rows)} of {len(rows)} rows pass"
    assert (
        "megatron: Megatron-LM weak scaling, A100 (Narayanan et al., SC'21, table 1 TFLOP/s; PALM table IV seq/s)"
        in lines
    )


def test_json_gives_every_row(run_cli: RunCli) -> None:
    code, out, _ = run_cli("validate", "--json")
    rows = json.loads(out)
    assert code == 0 and all(row["passed"] for row in rows)
    row = next(row for row in rows if row["case"] == "Ring_8npus all_reduce")
    assert row == {
        "suite": "astra_sim",
        "case": "Ring_8npus all_reduce",
        "metric": "cycles",
        "expected": 64440,
        "got": 64440.0,
        "error": 0.0,
        "tolerance": "exact",
        "passed": True,
    }


def test_a_moved_number_fails_naming_its_row(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = load_cases()

    def moved(path: Path = HOME / "cases.yaml") -> tuple[validate_cases.Suite, ...]:
        suites = []
        for suite in shipped:
            cases = tuple(
                replace(
                    case,
                    checks=tuple(
                        replace(check, expected=check.expected + 1)
                        if (case.name, check.metric) == ("gpt_18b", "total_time_ps")
                        else check
                        for check in case.checks
                    ),
                )
                for case in suite.cases
            )
            suites.append(replace(suite, cases=cases))
        return tuple(suites)

    monkeypatch.setattr("stratasim.cli.validate.load_cases", moved)
    code, out, err = run_cli("validate")
    assert code == 1
    failed = [line for line in out.splitlines() if " / " in line and "FAIL" in line]
    assert len(failed) == 1 and failed[0].startswith("megatron / gpt_18b / total_time_ps")
    assert "9,028,600,154,140  9,028,600,154,139  -1.1e-11 %" in failed[0] and out.endswith(" rows pass, 1 FAIL\n")
    assert err == "error: 1 row failed: megatron / gpt_18b / total_time_ps\n"


def test_an_exact_figure_fails_by_one() -> None:
    exact = Check("cycles", 64440, tolerance=0)
    assert exact.passes(64440) and not exact.passes(64441) and exact.allowed == "exact"
    banded = Check("samples_per_second", 10.0, band=(0.7, 0.85))
    assert banded.passes(8.0) and not banded.passes(9.0) and banded.allowed == "x0.7-0.85"


def test_a_formula_is_worked_out_exactly_or_refused() -> None:
    names = variables([{"kind": "ring", "size": 3, "bandwidth": "50GB/s", "latency": "500ns"}], "1MiB", "10ns")
    assert (names["n"], names["n0"], names["alpha"], names["B"], names["S"], names["delay"]) == (
        3,
        3,
        500_000,
        5 * 10**10,
        2**20,
        10_000,
    )
    # ceil(2^20 / 3) = 349526 bytes take ceil(349526e12 / 5e10) = 6990520 ps.
    assert evaluate("2 * (n - 1) * (alpha + ser(ceil(S / n), B))", names, "here") == 4 * (500_000 + 6_990_520)
    with pytest.raises(StrataSimError, match="here: the formula may not use .__import__"):
        evaluate("__import__('os')", names, "here")
    with pytest.raises(StrataSimError, match="here: the formula gives 1048576/3, not a whole number of picoseconds"):
        evaluate("S / n", names, "here")
    with pytest.raises(StrataSimError, match="here: the formula may not use 'm'"):
        evaluate("2 * m", names, "here")


def test_a_failed_run_is_a_failed_row(monkeypatch: pytest.MonkeyPatch) -> None:
    suite = next(suite for suite in load_cases() if suite.name == "astra_sim")
    broken = replace(suite.cases[0], inputs={**suite.cases[0].inputs, "network": "network/none.yml"})
    (row,) = validate([replace(suite, cases=(broken,))])
    assert not row.passed and row.got is None and "none.yml" in row.problem


def test_the_shipped_inputs_are_the_repositorys() -> None:
    listed = copies()
    shipped = {str(path.relative_to(DATA)) for path in DATA.rglob("*") if path.is_file()}
    assert shipped == set(listed), "python tools/sync_validate_data.py"
    stale = [copy for copy, original in listed.items() if (DATA / copy).read_bytes() != (ROOT / original).read_bytes()]
    assert not stale, f"{stale} differ from the originals: python tools/sync_validate_data.py"


def test_the_scalesim_layers_are_the_adapters_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.adapters.layers import SCALESIM_LAYERS

    scalesim = next(suite for suite in load_cases() if suite.name == "scalesim")
    layers = {case.inputs["layer"]: case.inputs for case in scalesim.cases}
    assert {name: {"kind": kind, **args} for name, (kind, args) in SCALESIM_LAYERS.items()} == {
        name: {key: value for key, value in inputs.items() if key not in ("device", "layer")}
        for name, inputs in layers.items()
    }


def _sources(into: Path) -> Path:
    """What the wheel is built from, copied: setuptools writes build/ and the egg-info beside its sources, where
    other tests (another worker's, under pytest-xdist) read the repository."""
    for folder in {*installed_layout.mapped_folders().values()}:
        shutil.copytree(ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, into / name)
    return into


@pytest.mark.slow
def test_the_wheel_ships_the_cases_and_their_inputs(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(_sources(tmp_path / "src")),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "wheel"),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "wheel").glob("stratasim-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"stratasim/validate/cases.yaml", *(f"stratasim/validate/data/{copy}" for copy in copies())}
    assert expected <= names, sorted(expected - names)
