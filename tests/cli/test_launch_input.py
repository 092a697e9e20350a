"""Bad ``compute.launch`` input (and ``stratasim serve --launch``) ends ``stratasim check`` and ``stratasim run`` with one clear message naming the key
and what is expected, and exit code 2, never a traceback: an unknown mode; a host time zero, negative or not a
time; ``launch`` on a backend other than ``measured``; ``eager`` on a device whose profile did not measure the host's
issue time (a shipped one, or a device file without ``launch``) and no time given; a device file whose measured
host time is not positive."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.compute_layer.reference_profile import save_measurement
from tests.conftest import RunCli

STUDY = """\
workload: {kind: collective, collective: all_reduce, size: 1MiB}
network:
  topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: measured, device: h100}
"""

NEEDS_TIME = "'launch: eager' needs the host's time to issue one kernel"

CASES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "mode": (("compute.launch=fast",), "compute.launch.mode: ", "input should be 'graph' or 'eager', got 'fast'"),
    "number": (("compute.launch=5",), "compute.launch: ", "expected graph, eager or {eager: TIME}"),
    "zero": (("compute.launch={eager: 0us}",), "compute.launch.time.eager: ", "input should be greater than 0"),
    "negative": (("compute.launch={eager: -8us}",), "compute.launch.time.eager: ", "a time cannot be negative"),
    "not-a-time": (("compute.launch={eager: 8GB}",), "compute.launch.time.eager: ", "unknown time unit 'GB'"),
    "roofline": (
        ("compute.launch={eager: 8us}", "compute.backend=roofline"),
        "compute: ",
        "'launch' is read by the measured compute backend only",
    ),
    "shipped": (("compute.launch=eager",), "compute: ", f"{NEEDS_TIME}, which the profile of 'h100' did not measure"),
}


def _one_clear_message(code: int, err: str, *fragments: str) -> None:
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
    assert err.count("\n  ") == 1, err  # one problem
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("launch") / "study.yaml"
    path.write_text(STUDY, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("case", CASES)
def test_bad_launch_is_one_clear_message(study: Path, run_cli: RunCli, command: str, case: str) -> None:
    overrides, key, said = CASES[case]
    code, out, err = run_cli(command, str(study), *(arg for item in overrides for arg in ("--set", item)))
    assert out == ""
    _one_clear_message(code, err, key + said if key != "compute: " else said, "study.yaml")
    if case == "shipped":
        assert "launch: {eager: 8us}" in err and "stratasim profile" in err


@pytest.fixture(scope="module")
def device_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference H100 profile (no eager launch measured) saved as a measurement of ``mygpu``."""
    out = tmp_path_factory.mktemp("launch-device")
    save_measurement(out)
    return out


def test_eager_on_a_device_file_that_did_not_measure_it_is_one_error(device_folder: Path, run_cli: RunCli) -> None:
    study = device_folder / "study.yaml"
    study.write_text(STUDY.replace("device: h100", "device: {file: mygpu.device.yaml}"), encoding="utf-8")
    code, out, err = run_cli("check", str(study), "--set", "compute.launch=eager")
    _one_clear_message(code, err, f"{NEEDS_TIME}, which the profile of 'mygpu' did not measure")
    code, out, err = run_cli("check", str(study), "--set", "compute.launch={eager: 8us}")
    assert code == 0 and out.startswith("OK"), err


@pytest.mark.parametrize("value", [0.0, -1e-5, "8us"])
def test_a_device_file_whose_host_time_is_not_a_positive_number_is_one_error(
    device_folder: Path, run_cli: RunCli, value: object
) -> None:
    document = yaml.safe_load((device_folder / "mygpu.device.yaml").read_text(encoding="utf-8"))
    document["launch"] = {"eager_s": value}
    (device_folder / "spoiled.device.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    study = device_folder / "spoiled.yaml"
    study.write_text(STUDY.replace("device: h100", "device: {file: spoiled.device.yaml}"), encoding="utf-8")
    code, out, err = run_cli("check", str(study))
    _one_clear_message(code, err, "compute.device.launch.eager_s: ", "spoiled.device.yaml")


def test_serve_reads_launch_as_the_study_does(run_cli: RunCli) -> None:
    import argparse

    from stratasim.cli.serve import add_arguments, options_of
    from stratasim.compute_layer.backend_section import EagerLaunch
    from stratasim.remote.serve_options import ServeOptions

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = options_of(parser.parse_args(["compute", "--backend", "measured", "--launch", "8us"]))
    assert options.section is not None and isinstance(options.section.launch, EagerLaunch)
    assert options.section.launch.eager == 8 * 10**6  # picoseconds
    assert ServeOptions.from_json(options.to_json()) == options  # as a spawned server receives it
    plain = options_of(parser.parse_args(["compute", "--backend", "measured", "--launch", "eager"]))
    assert plain.section is not None and plain.section.launch == "eager"
    for value, said in (("fast", "not 'fast'"), ("0us", "not '0us'")):
        code, out, err = run_cli("serve", "compute", "--backend", "measured", "--launch", value)
        assert (
            code == 2
            and out == ""
            and err
            == (
                "error: --launch: expected graph, eager or the host's time to issue one kernel, a positive time such as "
                f"8us, {said}\n"
            )
        )
    code, _, err = run_cli("serve", "compute", "--backend", "roofline", "--launch", "eager")
    assert code == 2 and err == "error: --launch is read by the measured compute backend only\n"
