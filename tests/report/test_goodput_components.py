"""The goodput model's links and switches (counted from the study's topology) and its checkpoint written once per
model shard (each TP rank of each pipeline stage), against hand computations."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

import stratasim
from stratasim.config import load_study
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import ConfigError
from stratasim.network_layer.topologies import components
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.examples.test_studies import EXAMPLES

# TP 2, PP 2, DP 4 with ZeRO stage 1 on 16 NPUs: rings of 4, two switches of 2, a switch of 2 on top.
STUDY: dict[str, Any] = {
    "name": "goodput-small",
    "workload": {
        "kind": "transformer",
        "model": {"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 512, "vocab": 32000},
        "parallelism": {"tp": 2, "pp": 2, "dp": 4, "zero": 1, "micro_batch": 1, "global_batch": 8},
    },
    "network": {
        "backend": "analytical",
        "topology": [
            {"kind": "ring", "size": 4, "bandwidth": "100GB/s", "latency": "1us"},
            {"kind": "fully_connected", "size": 2, "bandwidth": "50GB/s", "latency": "1us"},
            {"kind": "switch", "size": 2, "bandwidth": "25GB/s", "latency": "2us"},
        ],
    },
    "compute": {"backend": "roofline", "device": "h100"},
    "goodput": {"npus_per_node": 4, "checkpoint": {"bandwidth": "1GB/s"}},
}


def _goodput(**goodput: Any) -> dict[str, Any]:
    data = copy.deepcopy(STUDY)
    for key, value in goodput.items():
        data["goodput"][key] = {**data["goodput"].get(key, {}), **value}
    report = stratasim.run(data)
    assert report.training is not None
    return dict(report.training["goodput"])


def test_links_and_switches_are_counted_from_the_topology() -> None:
    # 16 NPUs: 4 rings of 4 (4 cables each), 8 fully connected pairs (1 each), 8 switches of 2 (2 cables each).
    topology = stratasim.load_study(EXAMPLES / "quickstart.yaml").topology_proto()
    assert components(topology) == (4 * 8 + 8 * 4, 8)  # 4 rings of 8, 8 switches of 4 (quickstart)
    data = copy.deepcopy(STUDY)
    del data["goodput"]
    assert components(parse_study(data, "study.yaml").topology_proto()) == (4 * 4 + 8 * 1 + 8 * 2, 8)
    fat_tree = load_study(EXAMPLES / "fat_tree_alltoall.yaml").topology_proto()
    assert components(fat_tree) == (48, 20)  # a k = 4 fat tree: 16 + 16 + 16 cables, 8 + 8 + 4 switches


def test_the_job_mtbf_combines_npu_node_link_and_switch_rates() -> None:
    """1 / M = 16 / M_npu + 4 / M_node + 40 / M_link + 8 / M_switch."""
    rates = {"npu": "1000h", "node": "500h", "link": "4000h", "switch": "800h"}
    figures = _goodput(mtbf=rates)
    assert figures["components"] == {"npu": 16, "node": 4, "link": 40, "switch": 8}
    hours = 1 / (16 / 1000 + 4 / 500 + 40 / 4000 + 8 / 800)
    assert figures["job_mtbf_s"] == pytest.approx(hours * 3600, rel=1e-12)
    assert _goodput()["components"] == {"npu": 16, "node": 4}  # unset: in the nodes' share, as the defaults are


def _checkpoint_hand(workload: TransformerWorkload) -> tuple[int, int, int]:
    """Each stage's shard (bf16 weights, 12-byte Adam states, of one TP rank), and the per-NPU bytes of the
    first stage when every rank writes what it holds (ZeRO 1: all its weights, a quarter of its states)."""
    shards = [(2 + 12) * workload.stage_parameters(stage) for stage in range(2)]
    held = 2 * workload.stage_parameters(0) + 12 * math.ceil(workload.stage_parameters(0) / 4)
    return shards[0], shards[1], held


def test_each_model_shard_is_written_once() -> None:
    """spread: the larger stage's shard / DP 4 per NPU; one_per_shard: the whole shard by DP rank 0; both over
    the per-NPU 1 GB/s. every_rank (the default): what an NPU holds, replicas included."""
    workload = TransformerWorkload(parse_study(STUDY, "study.yaml").workload.config)  # type: ignore[arg-type]
    first, second, held = _checkpoint_hand(workload)
    largest = max(first, second)
    assert _goodput(checkpoint={"writers": "spread"})["checkpoint_s"] == math.ceil(largest / 4) / 1e9
    assert _goodput(checkpoint={"writers": "one_per_shard"})["checkpoint_s"] == largest / 1e9
    every = _goodput()["checkpoint_s"]
    assert every >= held / 1e9 and every == _goodput(checkpoint={"writers": "every_rank"})["checkpoint_s"]
    assert math.ceil(largest / 4) < held < largest


def test_a_node_bandwidth_shares_a_node_among_its_npus() -> None:
    """Nodes of 4 NPUs: with spread writing, the busiest node writes its four NPUs' shares (of whichever stages
    they run) together at the node's 2 GB/s."""
    workload = TransformerWorkload(parse_study(STUDY, "study.yaml").workload.config)  # type: ignore[arg-type]
    first, second, _ = _checkpoint_hand(workload)
    data = copy.deepcopy(STUDY)
    data["goodput"]["checkpoint"] = {"writers": "spread", "node_bandwidth": "2GB/s"}
    report = stratasim.run(data)
    assert report.training is not None
    figures = report.training["goodput"]
    layout = workload.config.parallelism.layout
    share = {0: math.ceil(first / 4), 1: math.ceil(second / 4)}
    nodes = [sum(share[layout.rank(npu, "pp")] for npu in range(node, node + 4)) for node in range(0, 16, 4)]
    assert figures["checkpoint_s"] == max(nodes) / 2e9


def test_one_bandwidth_at_a_time() -> None:
    with pytest.raises(ConfigError) as both:
        _goodput(checkpoint={"bandwidth": "1GB/s", "node_bandwidth": "2GB/s"})
    assert dict(both.value.problems) == {
        "goodput.checkpoint": "give bandwidth (per NPU) or node_bandwidth (per node), not both"
    }


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("writers", "everyone", "every_rank"),
        ("node_bandwidth", "fast", "bandwidth"),
    ],
)
def test_bad_checkpoint_keys_name_the_key(key: str, value: str, said: str) -> None:
    with pytest.raises(ConfigError) as bad:
        _goodput(checkpoint={key: value})
    problems = dict(bad.value.problems)
    assert list(problems) == [f"goodput.checkpoint.{key}"] and said in problems[f"goodput.checkpoint.{key}"]


def test_a_bad_link_mtbf_names_the_key() -> None:
    with pytest.raises(ConfigError) as bad:
        _goodput(mtbf={"link": "-5h"})
    assert list(dict(bad.value.problems)) == ["goodput.mtbf.link"]
