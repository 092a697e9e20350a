"""Numbers that fit nothing — beyond int64, infinite, NaN, outside a quantity's plausible band — are one clear
error naming the key, found before anything is built; traces and profiles refuse theirs naming the node or row."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import stratasim
from stratasim.chakra import et_def_pb2
from stratasim.compute_layer.profile import ProfileCompute
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import ConfigError, SimulationError, WorkloadError
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.astra_text import read_astra_text
from stratasim.workload_layer.traces.chakra import to_graph, write_trace
from tests.compute_layer.profile_helpers import write_table

ROOT = Path(__file__).resolve().parents[2]

STUDY: dict[str, Any] = {
    "name": "limits",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
    "system": {"algorithm": "ring", "endpoint_delay": "10ns"},
    "network": {"topology": [{"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"}]},
}


def _problems(**changes: Any) -> list[tuple[str, str]]:
    """The problems of :data:`STUDY` with ``changes`` (``section__key=value``, ``topology`` for its first
    dimension) applied."""
    data = copy.deepcopy(STUDY)
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        target = data["network"]["topology"][0] if section == "topology" else data.setdefault(section, {})
        target[key] = value
    with pytest.raises(ConfigError) as caught:
        parse_study(data, "limits.yaml")
    return caught.value.problems


@pytest.mark.parametrize(
    ("changes", "key", "fragment"),
    [
        ({"topology__bandwidth": float("inf")}, "network.topology[0].bandwidth", "not a finite number"),
        ({"topology__bandwidth": float("nan")}, "network.topology[0].bandwidth", "not a finite number"),
        ({"system__splits": 2**64}, "system.splits", "does not fit a 64-bit integer"),
        ({"workload__repeat": 10**30}, "workload.repeat", "does not fit a 64-bit integer"),
        ({"topology__size": -(2**70)}, "network.topology[0].size", "does not fit a 64-bit integer"),
    ],
)
def test_numbers_that_fit_no_key(changes: dict[str, Any], key: str, fragment: str) -> None:
    [(where, message)] = _problems(**changes)
    assert where == key and fragment in message


@pytest.mark.parametrize(
    ("changes", "key", "fragment"),
    [
        ({"topology__bandwidth": "1e-30B/s"}, "network.topology[0].bandwidth", "1kB/s to 100PB/s"),
        ({"topology__bandwidth": "999B/s"}, "network.topology[0].bandwidth", "1kB/s to 100PB/s"),
        ({"topology__bandwidth": "1e400GB/s"}, "network.topology[0].bandwidth", "1kB/s to 100PB/s"),
        ({"topology__latency": "2s"}, "network.topology[0].latency", "at most 1 s"),
        ({"topology__latency": "1e30s"}, "network.topology[0].latency", "int64 picoseconds"),
        ({"system__endpoint_delay": "1.5s"}, "system.endpoint_delay", "at most 1 s"),
        ({"workload__size": "1e30B"}, "workload.size", "at most 1 PiB"),
        ({"system__memory_capacity": "2PiB"}, "system.memory_capacity", "at most 1 PiB"),
        ({"system__local_mem_bw": "1e20TB/s"}, "system.local_mem_bw", "1kB/s to 10^21 B/s"),
        ({"topology__energy_per_bit": "1e9pJ/bit"}, "network.topology[0].energy_per_bit", "10nJ/bit"),
    ],
)
def test_quantities_outside_their_band(changes: dict[str, Any], key: str, fragment: str) -> None:
    [(where, message)] = _problems(**changes)
    assert where == key and fragment in message


def test_the_bands_edges_are_accepted() -> None:
    data = copy.deepcopy(STUDY)
    data["network"]["topology"][0].update(bandwidth="1kB/s", latency="1s")
    data["workload"]["size"] = "1PiB"
    assert parse_study(data, "edges.yaml").network.topology[0].latency == 10**12


def test_an_empty_algorithm_mapping_is_refused() -> None:
    [(where, message)] = _problems(system__algorithm={})
    assert where == "system.algorithm" and "names no algorithm" in message


@pytest.mark.parametrize("size", [2**32, 5 * 10**9, 2**62])
def test_a_topology_beyond_the_wire(size: int) -> None:
    [(where, message)] = _problems(topology__size=size)
    assert where == "network.topology" and "32-bit" in message


def test_the_cli_names_the_key_without_a_traceback() -> None:
    for setting, fragment in (
        ("network.topology.0.bandwidth=.inf", "not a finite number"),
        ("system.algorithm={}", "names no algorithm"),
        ("workload.size=1e30B", "at most 1 PiB"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "stratasim", "run", "examples/quickstart.yaml", "--set", setting],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr and fragment in done.stderr


def _chakra_node(**fields: Any) -> et_def_pb2.Node:
    node = et_def_pb2.Node(id=1, name="n", **fields)
    return node


@pytest.mark.parametrize("micros", [2**64 - 1, 2**63 // 10**6 + 1])
def test_a_chakra_duration_beyond_int64_picoseconds(micros: int) -> None:
    node = _chakra_node(type=et_def_pb2.COMP_NODE, duration_micros=micros)
    with pytest.raises(WorkloadError, match=r"node 1: duration_micros .* does not fit int64"):
        to_graph([node], 0, 1)


@pytest.mark.parametrize("size", [2**63, 2**64 - 1])
def test_a_chakra_size_beyond_int64(size: int) -> None:
    attrs = [
        et_def_pb2.AttributeProto(name="comm_type", int64_val=workload_pb2.ALL_REDUCE),
        et_def_pb2.AttributeProto(name="comm_size", uint64_val=size),
    ]
    node = _chakra_node(type=et_def_pb2.COMM_COLL_NODE, attr=attrs)
    with pytest.raises(WorkloadError, match="comm_size is beyond int64"):
        to_graph([node], 0, None)


def _memory_node(node_id: int, memory: int, *deps: int) -> et_def_pb2.Node:
    attrs = [et_def_pb2.AttributeProto(name="memory_bytes", int64_val=memory)]
    return et_def_pb2.Node(
        id=node_id, name=f"n{node_id}", type=et_def_pb2.COMP_NODE, duration_micros=1, data_deps=deps, attr=attrs
    )


@pytest.mark.parametrize(
    ("nodes", "fragment"),
    [
        ([_memory_node(1, -4096)], "node 1: frees 4 KiB (memory_bytes) when the nodes before it hold 0 B"),
        (
            [_memory_node(1, 1024), _memory_node(2, -4096, 1)],
            "node 2: frees 4 KiB (memory_bytes) when the nodes before it hold 1 KiB",
        ),
    ],
)
def test_a_trace_node_freeing_memory_never_allocated_is_refused(
    tmp_path: Path, nodes: list[et_def_pb2.Node], fragment: str
) -> None:
    for rank in range(2):
        write_trace(tmp_path / f"t.{rank}.et", et_def_pb2.GlobalMetadata(), nodes)
    study = {
        "workload": {"kind": "chakra", "path": str(tmp_path / "t")},
        "network": {"topology": [{"kind": "switch", "size": 2, "bandwidth": "50GB/s", "latency": "500ns"}]},
    }
    with pytest.raises(WorkloadError) as caught:
        stratasim.run(study)
    assert fragment in str(caught.value) and "'n" not in str(caught.value)  # by id: a trace's names are not echoed
    freed_after = [_memory_node(1, 4096), _memory_node(2, -4096, 1)]
    for rank in range(2):
        write_trace(tmp_path / f"t.{rank}.et", et_def_pb2.GlobalMetadata(), freed_after)
    assert stratasim.run(study).total_time_ns > 0  # freeing what was allocated is fine


@pytest.mark.parametrize("compute", ["99999999999999999999", str(2**63 // 10**6 + 1)])
def test_a_text_workload_number_beyond_int64_picoseconds(tmp_path: Path, compute: str) -> None:
    path = tmp_path / "w.txt"
    path.write_text(f"DATA\n1\nconv1 -1 {compute} NONE 0 12864 NONE 0 32291 ALLREDUCE 37632 3229\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match=r"w.txt:3: .*compute time must be at most"):
        read_astra_text(path)


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        # A profile is not the study's own file: its values are not echoed (issue 15, item 5).
        ("1e40s,", "line 2, time: its value is outside the plausible range of a time"),
        ("7200s,", "line 2, time: its value is outside the plausible range of a time: at most 1 h"),
        ("1us,1e40", "line 2, energy_pj: expected at most 10^15 picojoules"),
    ],
)
def test_a_profile_row_beyond_its_band(tmp_path: Path, row: str, fragment: str) -> None:
    text = f"device,kind,dtype,m,k,n,time,energy_pj\nh100,gemm,bf16,1,1,1,{row}\n"
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        ProfileCompute(profile=write_table(tmp_path, text, "t.csv"))


def test_a_profile_dimension_beyond_int64(tmp_path: Path) -> None:
    text = f"device,kind,dtype,m,k,n,time\nh100,gemm,bf16,{2**63},1,1,1us\n"
    with pytest.raises(ConfigError, match="line 2, m: a gemm row needs m, a positive integer"):
        ProfileCompute(profile=write_table(tmp_path, text, "t.csv"))


@pytest.mark.parametrize("backend", ["analytical", "congestion_aware"])
def test_a_run_beyond_int64_picoseconds_is_refused(backend: str) -> None:
    data = copy.deepcopy(STUDY)
    data["workload"]["size"] = "1PiB"
    data["network"].update(
        backend=backend, topology=[{"kind": "ring", "size": 4, "bandwidth": "1kB/s", "latency": "1s"}]
    )
    with pytest.raises(SimulationError, match=r"reached .* s, beyond the int64 picoseconds"):
        stratasim.run(data)
