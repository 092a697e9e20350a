"""The extension guides' code works: the backend of docs/architecture/add-a-backend.md and the workload of
add-a-workload.md, registered as their pages say (an entry point each), run in a study like any built-in one."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import stratasim
from stratasim.kernel import registry
from stratasim.kernel.contracts import NetworkBackend, WorkloadSource

GUIDES = Path(__file__).resolve().parents[2] / "docs" / "architecture"


def _module(page: str, name: str) -> types.ModuleType:
    """The page's Python blocks, run in order as the body of a module called ``name``."""
    module = types.ModuleType(name)
    text = (GUIDES / page).read_text(encoding="utf-8")
    for number, block in enumerate(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)):
        exec(compile(block, f"{page} block {number}", "exec"), module.__dict__)  # noqa: S102 - the page's own code
    return module


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The guides' classes importable and registered as their pages' ``pyproject.toml`` lines say."""
    extra = {
        "stratasim.network": EntryPoint("fixed_delay", "docs_guide_backend:FixedDelayNetwork", "stratasim.network"),
        "stratasim.workload": EntryPoint("ping_pong", "docs_guide_workload:PingPongWorkload", "stratasim.workload"),
    }
    monkeypatch.setitem(sys.modules, "docs_guide_backend", _module("add-a-backend.md", "docs_guide_backend"))
    monkeypatch.setitem(sys.modules, "docs_guide_workload", _module("add-a-workload.md", "docs_guide_workload"))
    original = registry._registered

    def with_guides(group: str) -> tuple[EntryPoint, ...]:
        return (*original(group), *([extra[group]] if group in extra else []))

    monkeypatch.setattr(registry, "_registered", with_guides)
    yield


def _study(network_backend: str) -> dict[str, object]:
    return {
        "workload": {"kind": "ping_pong", "size": "1MiB", "rounds": 4},
        "system": {"endpoint_delay": "0ns"},
        "network": {
            "backend": network_backend,
            "topology": [{"kind": "ring", "size": 2, "bandwidth": "50GB/s", "latency": "500ns"}],
        },
    }


def test_the_guides_classes_satisfy_their_contracts(registered: None) -> None:
    network = registry.load("network", "fixed_delay")()
    assert isinstance(network, NetworkBackend)
    workload = registry.load("workload", "ping_pong")
    assert isinstance(workload(workload.Config(size="1KiB", rounds=1)), WorkloadSource)


@pytest.mark.parametrize("backend", ["analytical", "fixed_delay"])
def test_the_guides_workload_runs_on_the_guides_network_and_a_built_in_one(registered: None, backend: str) -> None:
    """Eight one-way messages of 1 MiB, each one hop of 500 ns plus 2^20 B / 50 GB/s = 20,971,520 ps."""
    report = stratasim.run(_study(backend))
    assert report.total_time_ps == 8 * (500_000 + 20_971_520)
