"""A file a study names but may not own — a device or fabric include, a profile table, a communicator-groups file —
is never echoed back in an error: what is wrong is said by the keys StrataSim expected, positions and types
(issue 15, item 5). Each test points at a "credentials" file and checks that none of its words come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.compute_layer.profile_table import load_profile
from stratasim.config import load_study
from stratasim.kernel.errors import StrataSimError
from stratasim.workload_layer.traces.comm_groups import read_comm_groups

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8")
SECRETS = ("aws_secret_access_key", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI", "hunter2", "s3cr3t_colour")


def error_of(action: object) -> str:
    with pytest.raises(StrataSimError) as caught:
        action()  # type: ignore[operator]
    return str(caught.value)


def assert_no_echo(message: str) -> None:
    for secret in SECRETS:
        assert secret not in message, message


def study_with(tmp: Path, section: str) -> Path:
    (tmp / "study").mkdir()
    start = QUICKSTART.index("  topology:")
    end = QUICKSTART.index("compute:")
    text = QUICKSTART[:start] + "  topology: {kind: graph, file: ../creds.yaml}\n" + QUICKSTART[end:] \
        if section == "graph" else QUICKSTART.replace("device: h100", "device: {file: ../creds.yaml}")
    (tmp / "study" / "s.yaml").write_text(text, encoding="utf-8")
    return tmp / "study" / "s.yaml"


@pytest.mark.parametrize("section", ["device", "graph"])
@pytest.mark.parametrize(
    "creds",
    [
        "aws_secret_access_key: AKIAIOSFODNN7EXAMPLE\n",
        "preset: h100\npeak: {bf16: wJalrXUtnFEMI}\nmemory_bandwidth: hunter2\n",
        "chips: AKIAIOSFODNN7EXAMPLE\nswitches: [hunter2]\nbandwidth: wJalrXUtnFEMI\n",
        "aws_secret_access_key: 1\naws_secret_access_key: 2\n",
        "[aws_secret_access_key, AKIAIOSFODNN7EXAMPLE]\n",
        "s3cr3t_colour: {hunter2: wJalrXUtnFEMI}\n",
        "chips:\n  - {id: hunter2, links: [{to: wJalrXUtnFEMI}]}\n  - {id: AKIAIOSFODNN7EXAMPLE, links: [{to: hunter2}]}\n"
        "bandwidth: 50GB/s\nlatency: 1us\n",
    ],
    ids=["unknown key", "bad values", "bad fabric values", "duplicate key", "not a mapping", "nested", "bad link"],
)
def test_included_files_are_not_echoed(tmp_path: Path, section: str, creds: str) -> None:
    study = study_with(tmp_path, section)
    (tmp_path / "creds.yaml").write_text(creds, encoding="utf-8")
    message = error_of(lambda: load_study(study))
    assert_no_echo(message)
    assert "creds.yaml" in message


def test_what_is_wrong_is_still_said(tmp_path: Path) -> None:
    study = study_with(tmp_path, "device")
    (tmp_path / "creds.yaml").write_text("preset: h100\nmemory_bandwidth: hunter2\nsecret_thing: 1\n", encoding="utf-8")
    message = error_of(lambda: load_study(study))
    assert "compute.device.memory_bandwidth: cannot read its value as a bandwidth; write it like 100GB/s" in message
    assert "compute.device: a key StrataSim does not know, expected one of preset, name, peak" in message
    assert "its contents are not shown" in message and "secret_thing" not in message


def test_the_study_s_own_keys_are_still_echoed(tmp_path: Path) -> None:
    """The study is the user's own: its values come back as before, next to the included file's."""
    study = study_with(tmp_path, "device")
    study.write_text(study.read_text().replace("{file: ../creds.yaml}", "{file: ../creds.yaml, tdp: warm}"))
    (tmp_path / "creds.yaml").write_text("preset: h100\n", encoding="utf-8")
    assert "cannot read 'warm' as a power" in error_of(lambda: load_study(study))


@pytest.mark.parametrize(
    "table",
    [
        "aws_secret_access_key,AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI,hunter2\n",
        "device,kind,dtype,m,k,n,time,s3cr3t_colour\nh100,gemm,bf16,1,1,1,1us,hunter2\n",
        "device,kind,dtype,m,k,n,time\nhunter2,wJalrXUtnFEMI,AKIAIOSFODNN7EXAMPLE,s3cr3t_colour,1,1,hunter2\n",
        "device,kind,dtype,m,k,n,time,energy_pj\nh100,gemm,bf16,1,1,1,1us,hunter2\n",
    ],
    ids=["not a profile", "unknown column", "bad cells", "bad energy"],
)
def test_profile_tables_are_not_echoed(tmp_path: Path, table: str) -> None:
    (tmp_path / "creds.csv").write_text(table, encoding="utf-8")
    message = error_of(lambda: load_profile(tmp_path / "creds.csv"))
    assert_no_echo(message)
    assert "creds.csv" in message and "line " in message


@pytest.mark.parametrize(
    "text",
    [
        '[{"device": "hunter2", "kind": "AKIAIOSFODNN7EXAMPLE", "dtype": "bf16", "m": "wJalrXUtnFEMI", "time": 1}]',
        '{"rows": ["AKIAIOSFODNN7EXAMPLE"]}',
        '[{"aws_secret_access_key": "AKIAIOSFODNN7EXAMPLE"}]',
    ],
)
def test_json_profiles_are_not_echoed(tmp_path: Path, text: str) -> None:
    (tmp_path / "creds.json").write_text(text, encoding="utf-8")
    assert_no_echo(error_of(lambda: load_profile(tmp_path / "creds.json")))


@pytest.mark.parametrize(
    "text",
    [
        '{"aws_secret_access_key": "AKIAIOSFODNN7EXAMPLE"}',
        '{"auths": {"hunter2": "wJalrXUtnFEMI"}}',
        '{"aws_secret_access_key": [0, "hunter2"]}',
        '{"aws_secret_access_key": [0], "aws_secret_access_key": [1]}',
        '["AKIAIOSFODNN7EXAMPLE"]',
    ],
)
def test_comm_group_files_are_not_echoed(tmp_path: Path, text: str) -> None:
    (tmp_path / "creds.json").write_text(text, encoding="utf-8")
    message = error_of(lambda: read_comm_groups(tmp_path / "creds.json"))
    assert_no_echo(message)
    assert "creds.json" in message
