"""Every test here can name ``kind: fake`` (see :mod:`tests.config.fakes`)."""

from __future__ import annotations

import pytest

from tests.config.fakes import register_fake_workload


@pytest.fixture(autouse=True)
def fake_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    register_fake_workload(monkeypatch)
