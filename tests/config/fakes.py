"""A stand-in workload registered as ``kind: fake``, so config and CLI tests need no real workload layer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from stratasim.kernel import registry
from stratasim.kernel.schema import Bytes, Section, TimePs
from stratasim.v1 import workload_pb2

__all__ = ["FakeWorkload", "register_fake_workload", "register_workloads"]


class FakeWorkload:
    """``compute`` of work, then one all-reduce of ``size`` bytes, on each of ``npus`` NPUs (default: all)."""

    name = "fake"

    class Config(Section):
        size: Bytes
        compute: TimePs = 0
        npus: int | None = None

    def __init__(self, config: FakeWorkload.Config) -> None:
        self.config = config

    def npus_required(self) -> int | None:
        return self.config.npus

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        nodes = [
            workload_pb2.Node(id=1, name="forward", type=workload_pb2.COMP_NODE, duration_ps=self.config.compute),
            workload_pb2.Node(
                id=2,
                name="grads",
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=workload_pb2.ALL_REDUCE,
                comm_bytes=self.config.size,
                data_deps=[1],
            ),
        ]
        return [workload_pb2.ExecutionGraph(nodes=nodes)] * npus


def register_fake_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``kind: fake`` a registered workload until the test ends, next to the real ones."""
    register_workloads(monkeypatch, {"fake": FakeWorkload})


def register_workloads(monkeypatch: pytest.MonkeyPatch, fakes: Mapping[str, Callable[..., Any]]) -> None:
    """Make ``fakes`` (kind -> workload class) registered workloads until the test ends, next to the real ones."""
    real_available, real_load = registry.available, registry.load

    def available(layer: str, extra: Mapping[str, Callable[..., Any]] | None = None) -> list[str]:
        return real_available(layer, {**fakes, **(extra or {})} if layer == "workload" else extra)

    def load(layer: str, name: str, extra: Mapping[str, Callable[..., Any]] | None = None) -> Callable[..., Any]:
        return real_load(layer, name, {**fakes, **(extra or {})} if layer == "workload" else extra)

    monkeypatch.setattr(registry, "available", available)
    monkeypatch.setattr(registry, "load", load)
