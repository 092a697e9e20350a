"""Every test here can name ``kind: fake`` (see :mod:`tests.config.fakes`); ``study_file`` is a small study."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.fakes import register_fake_workload

STUDY = """\
name: tiny
workload: {kind: fake, size: 1MiB, compute: 2us}
system: {algorithm: ring, splits: 2, endpoint_delay: 10ns}
network:
  backend: analytical
  topology:
    - {kind: ring, size: 4, bandwidth: 50GB/s, latency: 500ns}
    - {kind: switch, size: 2, bandwidth: 25GB/s, latency: 1us}
compute: {backend: roofline, device: h100}
"""


@pytest.fixture(autouse=True)
def fake_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    register_fake_workload(monkeypatch)


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(STUDY, encoding="utf-8")
    return path
