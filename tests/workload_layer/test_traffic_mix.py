"""The traffic mix builds overlapping tasks on tiles and DRAM transfers with edge memory controllers, runs to the
end on both networks, and refuses bad input with one clear message per problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.network_layer.analytical import AnalyticalNetwork
from stratasim.system_layer import SystemOptions, simulate
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traffic_mix import TrafficMixWorkload
from tests.helpers import RunCli
from tests.system_layer.helpers import RING, ser, topology

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "palm_congestion.yaml")


def mix(**config: object) -> TrafficMixWorkload:
    return TrafficMixWorkload(TrafficMixWorkload.Config(**config))


def test_tiles_talk_to_the_controller_of_their_column() -> None:
    # 4 tiles and 2 controllers (NPUs 4 and 5): tiles 0 and 2 use controller 4, tiles 1 and 3 controller 5.
    workload = mix(
        tiles=4,
        memory_controllers=2,
        tasks=[
            {"kind": "all_reduce", "size": "1MiB"},
            {"kind": "dram_read", "size": "2MiB"},
            {"kind": "dram_write", "size": "3MiB"},
        ],
    )
    assert workload.npus_required() == 6
    graphs = workload.graphs(6)
    tile = graphs[1].nodes
    assert [node.type for node in tile] == [
        workload_pb2.COMM_COLL_NODE,
        workload_pb2.COMM_RECV_NODE,
        workload_pb2.COMM_SEND_NODE,
    ]
    assert list(tile[0].group) == [0, 1, 2, 3] and tile[0].comm_bytes == 1 << 20
    assert [(node.peer, node.tag, node.comm_bytes, node.pg_name) for node in tile[1:]] == [
        (5, 1, 2 << 20, "dram"),
        (5, 2, 3 << 20, "dram"),
    ]
    controller = graphs[5].nodes
    assert [(node.type, node.peer, node.tag) for node in controller] == [
        (workload_pb2.COMM_SEND_NODE, 1, 1),
        (workload_pb2.COMM_SEND_NODE, 3, 1),
        (workload_pb2.COMM_RECV_NODE, 1, 2),
        (workload_pb2.COMM_RECV_NODE, 3, 2),
    ]
    assert all(not node.ctrl_deps for graph in graphs for node in graph.nodes)  # one round: all at once


def test_rounds_follow_each_other_and_groups_are_kept() -> None:
    workload = mix(
        repeat=2,
        tasks=[{"kind": "all_to_all", "size": "1024B", "group": [2, 0]}, {"kind": "all_reduce", "size": "1024B"}],
    )
    graphs = workload.graphs(4)
    assert workload.npus_required() is None
    first, second = graphs[0].nodes[:2], graphs[0].nodes[2:]
    assert list(first[0].group) == [0, 2] and list(first[1].group) == []  # every NPU: no controllers
    assert all(list(node.ctrl_deps) == [0, 1] for node in second)
    assert [node.name for node in graphs[1].nodes] == ["all_reduce 1 round 0", "all_reduce 1 round 1"]


def test_tasks_overlap_on_the_analytical_network() -> None:
    # A read and a write of S on a 3-NPU ring (two tiles, controller 2): each transfer is one hop, and the
    # read and the write of a tile overlap, so everything ends after one message time.
    size, bandwidth, latency = 1 << 20, 50 * 10**9, 500_000
    workload = mix(
        memory_controllers=1,
        tasks=[{"kind": "dram_read", "size": f"{size}B"}, {"kind": "dram_write", "size": f"{size}B"}],
    )
    result = simulate(workload.graphs(3), AnalyticalNetwork(), topology((RING, 3, bandwidth, latency)), SystemOptions())
    assert result.total_time_ps == latency + ser(size, bandwidth)


def check(run_cli: RunCli, *overrides: str) -> tuple[int, str]:
    code, _, err = run_cli("check", EXAMPLE, *(arg for override in overrides for arg in ("--set", override)))
    return code, err


def test_example_checks(run_cli: RunCli) -> None:
    assert check(run_cli) == (0, "")


@pytest.mark.parametrize(
    ("overrides", "messages"),
    [
        (("workload.tasks.2.group=[0, 1]",), ["workload.tasks[2].group: a dram_read runs on every tile"]),
        (("workload.memory_controllers=0",), ["workload.memory_controllers: tasks[2], tasks[3] move DRAM bytes"]),
        (
            ("workload.tasks.0.group=[0, 17]",),
            ["workload.tasks[0].group: NPU 17 is not a tile; the tiles are NPUs 0..15"],
        ),
        (
            ("workload.tiles=null", "workload.memory_controllers=19"),
            ["workload.memory_controllers: 19 controllers on 20 NPUs leave 1 for tiles"],
        ),
        (
            ("workload.tasks.0.group=[3, 3]", "workload.tasks.1.kind=dram_copy", "workload.tasks.4.size=0B"),
            [
                "workload.tasks[0].group: lists NPU 3 more than once",
                "workload.tasks[1].kind: input should be",
                "workload.tasks[4].size: input should be greater than 0",
            ],
        ),
        (("workload.tasks=[]",), ["workload.tasks: list should have at least 1 item"]),
    ],
)
def test_bad_input_is_one_clear_error(run_cli: RunCli, overrides: tuple[str, ...], messages: list[str]) -> None:
    code, err = check(run_cli, *overrides)
    assert code == 2 and err.startswith("error: ") and err.count("error:") == 1 and "Traceback" not in err
    for message in messages:
        assert message in err
    assert len(err.strip().splitlines()) <= 1 + len(messages)  # a heading at most, then a line per problem
