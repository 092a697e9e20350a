"""Fabrics in study files: each kind becomes its topology message and layout; graphs inline or from a file;
collective studies on a torus and a fat-tree run end to end through ``stratasim run``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim import cli
from stratasim.config.study_file import load_study, parse_study
from stratasim.kernel.errors import ConfigError
from stratasim.study.run import run_study
from stratasim.v1 import network_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
LINK = {"bandwidth": "50GB/s", "latency": "500ns"}


def study(topology: Any, **system: Any) -> dict[str, Any]:
    return {
        "name": "fabric",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "system": system,
        "network": {"backend": "congestion_aware", "topology": topology},
    }


def topology_of(topology: Any, **system: Any) -> pb.Topology:
    return parse_study(study(topology, **system), "study.yaml").topology_proto()


@pytest.mark.parametrize(
    ("topology", "sizes", "field"),
    [
        ({"kind": "torus", "shape": [4, 4], **LINK}, [4, 4], "torus"),
        ({"kind": "mesh", "shape": [2, 3, 4], **LINK}, [2, 3, 4], "torus"),
        ({"kind": "fat_tree", "k": 4, **LINK}, [16], "fat_tree"),
        (
            {
                "kind": "dragonfly",
                "groups": 3,
                "routers_per_group": 2,
                "hosts_per_router": 2,
                "global_links_per_router": 1,
                "host_link": LINK,
                "local_link": LINK,
                "global_link": LINK,
            },
            [12],
            "dragonfly",
        ),
        ({"kind": "dgx1", **LINK}, [8], "dgx1"),
        (
            {"kind": "nvswitch", "gpus_per_board": 8, "planes": 6, "boards": 2, "trunk_link": LINK, **LINK},
            [16],
            "nvswitch",
        ),
        (
            {
                "kind": "hierarchical_alltoall",
                "local": {"size": 2, **LINK},
                "alltoall": {"size": 3, "switches": 2, **LINK},
            },
            [2, 3],
            "hierarchical_alltoall",
        ),
    ],
)
def test_every_kind_becomes_its_fabric_and_layout(topology: dict[str, Any], sizes: list[int], field: str) -> None:
    message = topology_of(topology)
    assert message.WhichOneof("fabric") == field
    assert [dim.size for dim in message.dimensions] == sizes
    assert parse_study(study(topology), "study.yaml").npus == math.prod(sizes)


def test_a_hierarchical_torus_has_a_speed_per_level() -> None:
    levels = {
        "local": {"size": 2, "bandwidth": "500GB/s", "latency": "100ns"},
        "horizontal": {"size": 2, "bandwidth": "25GB/s", "latency": "1us"},
        "vertical": {"size": 3, "bandwidth": "25GB/s", "latency": "2us"},
    }
    message = topology_of({"kind": "hierarchical_torus", **levels})  # the paper's Fig. 3a: 2 x 2 x 3
    assert list(message.torus.shape) == [2, 2, 3] and not message.torus.mesh
    assert [(s.bandwidth_bytes_per_s, s.latency_ps) for s in message.torus.link] == [
        (500e9, 100_000),
        (25e9, 10**6),
        (25e9, 2 * 10**6),
    ]


def test_the_astra_preset_applies_to_fabrics_too() -> None:
    message = topology_of({"kind": "fat_tree", "k": 4, **LINK}, preset="astra_compat")
    assert message.store_and_forward and message.delay_quantum_ps == 1000


def test_per_dimension_algorithms_must_fit_the_fabric_layout() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_study(study({"kind": "fat_tree", "k": 4, **LINK}, algorithm=["ring", "direct"]), "study.yaml")
    assert dict(raised.value.problems)["system.algorithm"] == "2 algorithms given for 1 topology dimensions"


def test_a_graph_lists_each_cable_once_or_from_both_ends() -> None:
    chips = [
        {"id": 0, "links": [{"to": 1, "distance": 2}, {"to": "sw", "latency": "1us"}]},
        {"id": 1, "links": [{"to": 0, "distance": 2}]},  # the same cable, from its other end
        {"id": 2, "links": [{"to": "sw", "bandwidth": "25GB/s", "latency": "1us"}]},
    ]
    message = topology_of(
        {
            "kind": "graph",
            "chips": chips,
            "switches": [{"id": "sw"}],
            "bandwidth": "100GB/s",
            "latency_per_distance": "5ns",
        }
    )
    fabric = message.graph
    assert list(fabric.node) == ["0", "1", "2", "sw"] and fabric.npus == 3
    cables = {
        (fabric.node[lk.src], fabric.node[lk.dst]): (lk.spec.bandwidth_bytes_per_s, lk.spec.latency_ps)
        for lk in fabric.link
    }
    assert len(fabric.link) == 6
    assert cables["0", "1"] == cables["1", "0"] == (100e9, 10_000)  # distance 2 x 5 ns
    assert cables["sw", "2"] == (25e9, 10**6)


def test_a_graph_file_reads_relative_to_the_study(tmp_path: Path) -> None:
    # The 2 x 2 torus of DEAP's example: every chip lists both neighbours, at distance 1.
    chips = [{"id": i, "links": [{"to": j, "distance": 1} for j in ((i + 1) % 4, (i + 3) % 4)]} for i in range(4)]
    (tmp_path / "topologies").mkdir()
    (tmp_path / "topologies" / "deap.yaml").write_text(
        yaml.safe_dump({"chips": chips, "bandwidth": "25GB/s", "latency_per_distance": "5ns"}), encoding="utf-8"
    )
    data = study({"kind": "graph", "file": "topologies/deap.yaml"})
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    loaded = load_study(tmp_path / "study.yaml")
    assert loaded.npus == 4 and len(loaded.topology_proto().graph.link) == 8
    assert run_study(loaded).total_time_ps > 0


@pytest.mark.parametrize("example", ["torus_allreduce.yaml", "fat_tree_alltoall.yaml"])
def test_the_examples_run_end_to_end(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    times = {}
    for backend in ("congestion_aware", "analytical"):
        code = cli.main(["run", str(ROOT / "examples" / example), "--json", "--set", f"network.backend={backend}"])
        out, err = capsys.readouterr()
        assert code == 0, err
        report = json.loads(out)
        assert report["npus"] == 16 and len(report["collectives"]) == 1
        times[backend] = report["total_time_ps"]
    if example.startswith("torus"):  # ring all-reduces along the torus's rings meet no contention
        assert times["congestion_aware"] == times["analytical"]
    else:  # 15 messages leave each NPU over its one link: the congestion-aware run is link-bound
        assert times["congestion_aware"] > 10 * times["analytical"]


def test_a_spawned_network_server_gets_the_fabric_too() -> None:
    example = ROOT / "examples" / "fat_tree_alltoall.yaml"
    local = run_study(load_study(example)).to_dict()
    remote = run_study(load_study(example, ["network.spawn=true"])).to_dict()
    for report in (local, remote):
        del report["wall_seconds"], report["backends"]
    assert local == remote
