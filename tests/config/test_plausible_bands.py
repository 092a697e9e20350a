"""Soft plausibility bands (:mod:`stratasim.kernel.plausible`): a value outside its key's usual band is warned of,
once, by its dotted key, value and band, and the study still runs; no example or ASTRA-sim reference input is
warned of, so the bands are not noise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.cli import main
from stratasim.config.study_file import load_study, parse_study
from stratasim.explore.sweep_file import load_sweep
from stratasim.importers.astra import read_astra
from stratasim.study.run import run_study
from tests.importers.reference_pairs import REFERENCE

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ASTRA = ROOT / "tests" / "data" / "astra-sim-inputs"


def _study(bandwidth: str = "50GB/s", **sections: Any) -> dict[str, Any]:
    return {
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "network": {"topology": [{"kind": "ring", "size": 4, "bandwidth": bandwidth, "latency": "500ns"}]},
        **sections,
    }


LINK = (
    "network.topology[0].bandwidth: 5MB/s is below the usual range of a network link (1GB/s to 10TB/s); check the unit"
)


def test_a_value_outside_its_band_is_warned_of_by_key_value_and_band() -> None:
    study = parse_study(_study("5MB/s"), "study.yaml")
    assert study.warnings == (LINK,)


def test_a_value_inside_its_band_is_not() -> None:
    assert parse_study(_study("1GB/s"), "study.yaml").warnings == ()
    assert parse_study(_study("10TB/s"), "study.yaml").warnings == ()  # the band's ends are in it


def test_the_run_still_succeeds_and_its_report_carries_the_warning() -> None:
    report = run_study(parse_study(_study("5MB/s"), "study.yaml"))
    assert report.result.total_time_ps > 0
    assert LINK in report.warnings
    assert f"warning: {LINK}" in report.to_text()


def test_a_key_narrows_its_kind_band() -> None:
    """5GB/s is a plausible network link but not an on-chip SRAM's bandwidth; 64KiB is an SRAM, not an HBM."""
    device = {"device": {"preset": "h100", "sram": {"bandwidth": "5GB/s"}, "memory_capacity": "64KiB"}}
    study = parse_study(_study("5GB/s", compute=device), "study.yaml")
    assert study.warnings == (
        "compute.device.memory_capacity: 64KiB is below the usual range of a device's main memory (256MiB to 4TiB); "
        "check the unit",
        "compute.device.sram.bandwidth: 5GB/s is below the usual range of an on-chip SRAM (100GB/s to 10PB/s); "
        "check the unit",
    )


def test_above_a_band_and_in_a_mapping() -> None:
    device = {"device": {"preset": "h100", "peak": {"bf16": "5EFLOPS"}}}
    study = parse_study(_study(compute=device, system={"endpoint_delay": "500us"}), "study.yaml")
    assert study.warnings == (  # section by section, as a study is written
        "system.endpoint_delay: 500us is above the usual range of a latency (up to 100us); check the unit",
        "compute.device.peak.bf16: 5EFLOPS is above the usual range of a device's peak (1GFLOPS to 1EFLOPS); "
        "check the unit",
    )


def test_check_prints_the_warning_on_stderr_and_run_json_keeps_stdout_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(_study("5MB/s")))
    assert main(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("OK:") and err == f"warning: {LINK}\n"
    assert main(["run", str(path), "--json", "--quiet"]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out)["warnings"] == [LINK]


def test_an_override_is_warned_of_like_a_written_value(tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_study()))
    assert load_study(path).warnings == ()
    assert load_study(path, ["network.topology.0.bandwidth=5MB/s"]).warnings == (LINK,)


def _example_studies() -> list[Path]:
    return sorted(path for path in EXAMPLES.rglob("*.yaml") if path.parent.name != "explore")


@pytest.mark.parametrize("path", _example_studies(), ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_no_example_is_warned_of(path: Path) -> None:
    assert load_study(path).warnings == ()


@pytest.mark.parametrize("path", sorted((EXAMPLES / "explore").glob("*.yaml")), ids=lambda path: path.name)
def test_no_example_sweep_base_is_warned_of(path: Path) -> None:
    sweep = load_sweep(path)
    assert parse_study(sweep.base, sweep.base_source).warnings == ()


@pytest.mark.parametrize(("network", "system"), sorted(REFERENCE), ids=lambda name: name.rsplit("/", 2)[-2])
def test_no_astra_reference_input_is_warned_of(network: str, system: str) -> None:
    imported = read_astra(str(ASTRA / network), str(ASTRA / system))
    assert parse_study(imported.study, "imported.yaml").warnings == ()


def test_a_value_read_from_an_included_file_is_named_by_its_key_not_shown(tmp_path: Path) -> None:
    chips = [
        {"id": i, "links": [{"to": (i + 1) % 4, "distance": 1}, {"to": (i + 3) % 4, "distance": 1}]} for i in range(4)
    ]
    (tmp_path / "ring.yaml").write_text(
        yaml.safe_dump({"chips": chips, "bandwidth": "5MB/s", "latency_per_distance": "5ns"})
    )
    study = _study(network={"backend": "congestion_aware", "topology": {"kind": "graph", "file": "ring.yaml"}})
    (warning,) = parse_study(study, str(tmp_path / "study.yaml")).warnings
    assert warning == (
        f"network.topology.bandwidth: its value is below the usual range of a network link (1GB/s to "
        f"10TB/s); check the unit (read from {tmp_path / 'ring.yaml'}; its contents are not shown)"
    )
