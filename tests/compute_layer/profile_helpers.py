"""Shared profile tables and a workload of priced operators for the profile, per-kind and energy tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from stratasim.kernel import operators
from stratasim.kernel.schema import Section
from stratasim.v1 import workload_pb2
from tests.config.fakes import register_workloads

# GEMMs on a 2x2 grid of (m, k) with n = 1024, plus one elementwise line; energies on the GEMM grid only.
TABLE = """\
device,kind,dtype,m,k,n,elements,time,energy_pj
h100,gemm,bf16,1024,1024,1024,,10us,1000000
h100,gemm,bf16,2048,1024,1024,,20us,3000000
h100,gemm,bf16,1024,2048,1024,,30us,2000000
h100,gemm,bf16,2048,2048,1024,,60us,8000000
h100,elementwise,bf16,,,,1048576,4us,
h100,elementwise,bf16,,,,4194304,10us,
"""


def write_table(tmp_path: Path, text: str = TABLE, name: str = "times.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class OpsWorkload:
    """Per NPU: two GEMMs (1536x1024x1024), one elementwise op over 2Mi elements, then a 1 MiB all-reduce."""

    name = "ops"

    class Config(Section):
        pass

    def __init__(self, config: OpsWorkload.Config) -> None:
        self.config = config

    def npus_required(self) -> int | None:
        return None

    def graphs(self, npus: int) -> Sequence[workload_pb2.ExecutionGraph]:
        gemm = operators.gemm(1536, 1024, 1024)
        scale = operators.elementwise([2048, 1024])
        nodes = [
            workload_pb2.Node(id=1, name="g1", type=workload_pb2.COMP_NODE, op=gemm),
            workload_pb2.Node(id=2, name="g2", type=workload_pb2.COMP_NODE, op=gemm, data_deps=[1]),
            workload_pb2.Node(id=3, name="scale", type=workload_pb2.COMP_NODE, op=scale, data_deps=[2]),
            workload_pb2.Node(
                id=4,
                name="grads",
                type=workload_pb2.COMM_COLL_NODE,
                comm_type=workload_pb2.ALL_REDUCE,
                comm_bytes=2**20,
                data_deps=[3],
            ),
        ]
        return [workload_pb2.ExecutionGraph(nodes=nodes)] * npus


def register_ops_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``kind: ops`` a registered workload until the test ends."""
    register_workloads(monkeypatch, {"ops": OpsWorkload})
