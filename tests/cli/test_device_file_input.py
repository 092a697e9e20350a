"""A bad fitted device file (``compute: {backend: measured, device: {file: ...}}``) ends ``stratasim check`` and
``stratasim run`` with one clear message naming the key and the file, and exit code 2, never a traceback: a file
that is missing, not YAML or of another layout; a class or parameter missing; a parameter zero, negative or not
finite; a structure no preset gives; a profile that does not exist or is not the one fitted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.compute_layer.measured.parameters import PARAMETERS
from tests.compute_layer.reference_profile import save_measurement
from tests.conftest import RunCli

STUDY = """\
workload: {kind: collective, collective: all_reduce, size: 1MiB}
network:
  topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: measured, device: {file: DEVICE}}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the reference H100 profile saved as a measurement of ``mygpu`` and its device file."""
    out = tmp_path_factory.mktemp("device-file")
    save_measurement(out)
    return out


def _spoiled(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], str]:
    """The device file's text with ``change`` made to its mapping."""

    def text(folder: Path) -> str:
        document = yaml.safe_load((folder / "mygpu.device.yaml").read_text(encoding="utf-8"))
        change(document)
        return yaml.safe_dump(document, sort_keys=False)

    return text


CASES: dict[str, tuple[Callable[[Path], str] | None, str, str]] = {
    "missing": (None, "compute.device.file", "no such file"),
    "not-yaml": (lambda _: "{name: [mygpu\n", "compute.device.file", "invalid YAML"),
    "layout": (lambda _: PARAMETERS.read_text(encoding="utf-8"), "compute.device", "layout of the shipped parameters"),
    "class": (_spoiled(lambda d: d["classes"].pop("rmsnorm")), "compute.device.classes.rmsnorm", "required"),
    "parameter": (
        _spoiled(lambda d: d["classes"]["gemm"].pop("overhead_s")),
        "compute.device.classes.gemm.overhead_s",
        "required",
    ),
    "zero": (
        _spoiled(lambda d: d["classes"]["add"].update(floor_s=0.0)),
        "compute.device.classes.add.floor_s",
        "greater than 0",
    ),
    "negative": (
        _spoiled(lambda d: d["classes"]["gelu"].update(bandwidth=-3e12)),
        "compute.device.classes.gelu.bandwidth",
        "greater than 0",
    ),
    "not-finite": (
        _spoiled(lambda d: d["classes"]["gemm"].update(sharpness=float("nan"))),
        "compute.device.classes.gemm.sharpness",
        "finite number",
    ),
    "structure": (
        _spoiled(lambda d: d.update(structure="mychip")),
        "compute.device.structure",
        "expected a preset whose tiling and L2 a fit can assume (a100, h100",
    ),
    "no-profile": (
        _spoiled(lambda d: d.update(profile="gone.csv")),
        "compute.device.profile",
        "the profile the device was fitted to is not a file",
    ),
    "other-profile": (
        _spoiled(lambda d: d.update(profile="mygpu.profile.csv")),
        "compute.device.profile",
        "is not the profile fitted (its SHA-256 differs",
    ),
}


def _study(folder: Path, case: str) -> Path:
    spoil = CASES[case][0]
    device = folder / f"{case}.device.yaml"
    if spoil is not None:
        device.write_text(spoil(folder), encoding="utf-8")
    study = folder / f"{case}.yaml"
    study.write_text(STUDY.replace("DEVICE", device.name), encoding="utf-8")
    return study


def _one_clear_message(code: int, err: str, *fragments: str) -> None:
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
    assert err.count("\n  ") == 1, err  # one problem
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("case", CASES)
def test_check_says_what_is_wrong_with_the_device_file(folder: Path, run_cli: RunCli, case: str) -> None:
    _, key, said = CASES[case]
    code, out, err = run_cli("check", str(_study(folder, case)))
    assert out == ""
    names_file = () if case == "layout" else (f"{case}.device.yaml",)  # the layout is said of the whole device
    _one_clear_message(code, err, f"{key}: ", said, *names_file)


def test_run_refuses_a_device_file_without_a_class(folder: Path, run_cli: RunCli) -> None:
    code, out, err = run_cli("run", str(_study(folder, "class")), "--json")
    assert out == ""
    _one_clear_message(code, err, "compute.device.classes.rmsnorm: required", "class.device.yaml")


def test_the_good_file_checks(folder: Path, run_cli: RunCli) -> None:
    study = folder / "good.yaml"
    study.write_text(STUDY.replace("DEVICE", "mygpu.device.yaml"), encoding="utf-8")
    code, out, err = run_cli("check", str(study))
    assert code == 0 and out.startswith("OK"), err
    code, out, err = run_cli("run", str(study), "--json")
    assert code == 0 and json.loads(out)["npus"] == 2, err
