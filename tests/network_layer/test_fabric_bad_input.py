"""Impossible fabrics: one clear TopologyError each from both backends (and through a server), one named problem
each from a study file, and ``error: ...`` with exit code 2 and no traceback from ``stratasim run``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim import cli
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import ConfigError, TopologyError
from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.network_layer.congestion_aware import CongestionAwareNetwork
from stratasim.v1 import network_pb2 as pb
from tests.network_layer.fabrics import dgx1, dragonfly, fat_tree, graph, link, nvswitch, torus


def _one_way() -> pb.Topology:
    topology = graph(["a", "b", "c"], 3, [(0, 1, link())])
    topology.graph.link.add(src=1, dst=2, spec=link())  # c is reached but has no way out
    return topology


def _changed(topology: pb.Topology, change: Callable[[pb.Topology], None]) -> pb.Topology:
    change(topology)
    return topology


BAD: dict[str, tuple[pb.Topology, str]] = {
    "disconnected": (
        graph(["a", "b", "c", "d"], 4, [(0, 1, link()), (2, 3, link())]),
        "topology.graph: the graph is disconnected: 'a' and 'c' cannot reach each other",
    ),
    "unroutable": (_one_way(), "topology.graph: unroutable: no path from 'c' to 'a' (only the other way)"),
    "zero bandwidth": (
        graph(["a", "b"], 2, [(0, 1, link(0.0))]),
        "topology.graph: link[0] ('a' -> 'b').spec.bandwidth_bytes_per_s: must be positive, got 0.0 B/s",
    ),
    "negative bandwidth": (
        graph(["a", "b"], 2, [(0, 1, link(-5.0))]),
        "topology.graph: link[0] ('a' -> 'b').spec.bandwidth_bytes_per_s: must be positive, got -5.0 B/s",
    ),
    "unknown node": (
        _changed(graph(["a", "b"], 2, [(0, 1, link())]), lambda t: setattr(t.graph.link[0], "dst", 7)),
        "topology.graph: link[0].dst: no node 7 among 2",
    ),
    "odd k": (fat_tree(3), "topology.fat_tree: k: a k-ary fat-tree needs an even k of at least 2, got 3"),
    "torus dimension of 1": (torus(4, 1), "topology.torus: shape[1]: a torus dimension needs at least 2 NPUs, got 1"),
    "links per dimension": (
        torus(4, 4, links=(link(), link(), link())),
        "topology.torus: link: expected one link description for every dimension or one per dimension (2), got 3",
    ),
    "too many dragonfly groups": (
        dragonfly(10, 4, 2, 2),
        "topology.dragonfly: groups: 10 groups need 9 global links per group to reach one another, but "
        "4 routers_per_group x 2 global_links_per_router give 8",
    ),
    "boards without trunk": (nvswitch(8, 6, boards=2), "topology.nvswitch: trunk_link: required to join 2 boards"),
    "no generation": (dgx1(pb.Dgx1Fabric.GENERATION_UNSPECIFIED), "topology.dgx1: generation: unspecified"),
    "layout": (
        _changed(fat_tree(4), lambda t: setattr(t.dimensions[0], "size", 15)),
        "topology.dimensions: sizes [15] lay out 15 NPUs but the fat_tree fabric has 16",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("backend", [AnalyticalNetwork, CongestionAwareNetwork])
def test_backends_refuse_an_impossible_fabric(backend: type, case: str) -> None:
    topology, message = BAD[case]
    with pytest.raises(TopologyError) as raised:
        backend().configure(topology)
    assert str(raised.value).startswith(message)


def test_a_served_backend_refuses_it_with_the_same_message() -> None:
    from stratasim.remote import NetworkClient, spawn

    topology, message = BAD["disconnected"]
    with spawn("network", "congestion_aware") as endpoint:
        client = NetworkClient(endpoint, backend="congestion_aware", timeout_s=10.0)
        try:
            with pytest.raises(TopologyError, match=message):
                client.configure(topology)
        finally:
            client.close()


def study(topology: Any) -> dict[str, Any]:
    return {
        "name": "bad",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "network": {"backend": "congestion_aware", "topology": topology},
    }


LINK = {"bandwidth": "50GB/s", "latency": "500ns"}
CHIPS = [{"id": "a", "links": [{"to": "b"}]}, {"id": "b"}, {"id": "c", "links": [{"to": "d"}]}, {"id": "d"}]
STUDY_CASES: dict[str, tuple[Any, str, str]] = {
    "torus dimension of 1": (
        {"kind": "torus", "shape": [4, 1], **LINK},
        "network.topology.shape[1]",
        "greater than or equal to 2",
    ),
    "odd k": (
        {"kind": "fat_tree", "k": 5, **LINK},
        "network.topology",
        "k: a k-ary fat-tree needs an even k of at least 2, got 5",
    ),
    "unknown kind": (
        {"kind": "hypercube", **LINK},
        "network.topology",
        "expected a list of dimensions or a mapping whose kind is one of torus, mesh",
    ),
    "misspelt key": ({"kind": "fat_tree", "kk": 4, **LINK}, "network.topology.kk", "did you mean 'k'?"),
    "disconnected": (
        {"kind": "graph", "chips": CHIPS, **LINK},
        "network.topology",
        "the graph is disconnected: 'a' and 'c' cannot reach each other",
    ),
    "unknown chip": (
        {"kind": "graph", "chips": [{"id": 0, "links": [{"to": 1}]}, {"id": 1, "links": [{"to": 7}]}], **LINK},
        "network.topology",
        "chips[1].links[0].to: unknown chip or switch '7'",
    ),
    "zero bandwidth": (
        {
            "kind": "graph",
            "chips": [{"id": "a", "links": [{"to": "b", "bandwidth": "0GB/s"}]}, {"id": "b"}],
            "latency": "1us",
        },
        "network.topology.chips[0].links[0].bandwidth",
        "must be positive",
    ),
    "unroutable": (
        {
            "kind": "graph",
            "directed": True,
            "chips": [
                {"id": "a", "links": [{"to": "b"}]},
                {"id": "b", "links": [{"to": "a"}, {"to": "c"}]},
                {"id": "c"},
            ],
            **LINK,
        },
        "network.topology",
        "unroutable: no path from 'c' to 'a'",
    ),
    "disagreeing ends": (
        {
            "kind": "graph",
            "chips": [{"id": "a", "links": [{"to": "b"}]}, {"id": "b", "links": [{"to": "a", "latency": "2us"}]}],
            **LINK,
        },
        "network.topology",
        "chips[1].links[0]: the link from 'b' to 'a' is also at chips[0].links[0]",
    ),
    "distance without a scale": (
        {
            "kind": "graph",
            "chips": [{"id": "a", "links": [{"to": "b", "distance": 2}]}, {"id": "b"}],
            "bandwidth": "1GB/s",
        },
        "network.topology",
        "chips[0].links[0].distance: needs the graph's latency_per_distance",
    ),
}


@pytest.mark.parametrize("case", sorted(STUDY_CASES))
def test_a_study_names_the_problem(case: str) -> None:
    topology, path, fragment = STUDY_CASES[case]
    with pytest.raises(ConfigError) as raised:
        parse_study(study(topology), "study.yaml")
    problems = dict(raised.value.problems)
    assert path in problems, problems
    assert fragment in problems[path]


def test_a_missing_graph_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_study(study({"kind": "graph", "file": "nope.yaml"}), str(tmp_path / "study.yaml"))
    assert raised.value.problems == [("network.topology.file", f"{tmp_path / 'nope.yaml'}: no such file")]


@pytest.mark.parametrize("case", ["odd k", "disconnected", "unknown chip", "zero bandwidth", "unroutable"])
def test_stratasim_run_prints_one_error_and_exits_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology, path, fragment = STUDY_CASES[case]
    chips = tmp_path / "chips.yaml"
    if topology["kind"] == "graph":  # the graph from a file, as a study would give it
        chips.write_text(yaml.safe_dump({k: v for k, v in topology.items() if k != "kind"}), encoding="utf-8")
        topology = {"kind": "graph", "file": chips.name}
    file = tmp_path / "study.yaml"
    file.write_text(yaml.safe_dump(study(topology)), encoding="utf-8")
    code = cli.main(["run", str(file)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "Traceback" not in err
    assert f"  {path}: " in err and fragment in err


def test_the_command_itself_reports_a_disconnected_graph_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "chips.yaml").write_text(yaml.safe_dump({"chips": CHIPS, **LINK}), encoding="utf-8")
    file = tmp_path / "study.yaml"
    file.write_text(yaml.safe_dump(study({"kind": "graph", "file": "chips.yaml"})), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "stratasim", "run", str(file)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ")
    assert "network.topology: the graph is disconnected: 'a' and 'c' cannot reach each other" in done.stderr
