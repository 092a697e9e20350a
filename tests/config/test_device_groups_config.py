"""``compute.groups``: bad input gets one clear message naming the group's key, and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.config.test_config import problems, study
from tests.examples.test_studies import EXAMPLES

RING4 = {"topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}]}


def _groups(*groups: dict[str, object]) -> dict[str, str]:
    return problems(study(network=RING4, compute={"device": "h100", "groups": list(groups)}))


def test_a_group_naming_an_npu_outside_the_topology_is_refused() -> None:
    assert _groups({"npus": "2-4", "device": "a100"}) == {
        "compute.groups[0].npus": "NPU 4 is outside the topology, which has 4 NPUs (0-3)"
    }


def test_an_npu_in_two_groups_is_refused() -> None:
    found = _groups({"npus": [0, 1], "device": "a100"}, {"npus": "1-2", "device": "h200"})
    assert found == {"compute.groups[1].npus": "NPU 1 is already in group 0; an NPU runs one device"}


@pytest.mark.parametrize(
    ("npus", "said"),
    [
        ("x-2", "cannot read 'x-2' as an NPU id or a range 'a-b'"),
        ("3-1", "range '3-1' runs backwards"),
        ([-1], "an NPU id is 0 or more, got -1"),
    ],
)
def test_unreadable_npu_ids_are_refused(npus: object, said: str) -> None:
    (key, message), *_ = _groups({"npus": npus, "device": "a100"}).items()
    assert key.startswith("compute.groups[0].npus") and said in message


def test_groups_do_not_combine_with_per_kind() -> None:
    found = problems(
        study(compute={"device": "h100", "per_kind": {"gemm": "roofline"}, "groups": [{"npus": [0], "device": "a100"}]})
    )
    assert "cannot be combined with per_kind" in found["compute"]


def test_an_unknown_device_in_a_group_names_the_group(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = {
        "name": "unknown",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "network": RING4,
        "compute": {"device": "h100", "groups": [{"npus": "3", "device": "b900"}]},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    for command in ("check", "run"):
        code, _, err = run_cli(command, str(path))
        assert code != 0 and "Traceback" not in err
        assert "compute.groups[0].device: roofline has no device 'b900'; available: a100" in err


def test_a_missing_device_file_of_a_group_names_the_group(tmp_path: Path) -> None:
    found = _groups({"npus": [3], "device": {"file": str(tmp_path / "nope.yaml")}})
    assert list(found) == ["compute.groups[0].device.file"] and "no such file" in found["compute.groups[0].device.file"]


def test_a_serving_study_names_its_pools_devices_not_groups(run_cli) -> None:  # type: ignore[no-untyped-def]
    study = str(EXAMPLES / "serving" / "llama3_70b_h100_tp8.yaml")
    code, _, err = run_cli("check", study, "--set", 'compute.groups=[{npus: "0", device: a100}]')
    assert code != 0 and "Traceback" not in err
    assert "compute.groups: a serving study gives each pool its own device (workload.pools[i].device)" in err
