"""Bad values of the keys ``system.algorithm: nccl`` adds (``system.nccl.*``, ``network.topology[].in_network_reduction``)
each give one clear problem naming the key; ``stratasim run`` ends with it, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stratasim.config.study_file import parse_study
from tests.cli.test_bad_input import assert_one_clear_message
from tests.config.test_config import problems, study
from tests.helpers import stratasim_process

ROOT = Path(__file__).resolve().parents[2]
NVSWITCH = [{"kind": "switch", "size": 8, "bandwidth": "370.8GB/s", "latency": "250ns"}]
REDUCING = [{**NVSWITCH[0], "in_network_reduction": True}]


def nccl(nccl: dict[str, Any] | None = None, topology: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    system: dict[str, Any] = {"algorithm": "nccl"}
    if nccl is not None:
        system["nccl"] = nccl
    return study(system=system, network={"topology": topology or REDUCING})


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (nccl({"algorithm": "nvlink"}), "system.nccl.algorithm[0]", "'nvls'"),
        (nccl({"algorithm": ["ring", "nvlink"]}), "system.nccl.algorithm[1]", "'collnet_chain'"),
        (nccl({"algorithm": []}), "system.nccl.algorithm", "at least 1 item"),
        (
            nccl({"algorithm": ["ring", "ring"]}),
            "system.nccl.algorithm",
            "2 algorithms given for 1 topology dimensions",
        ),
        (nccl({"protocol": "ll256"}), "system.nccl.protocol", "'ll128'"),
        (nccl({"channels": 0}), "system.nccl.channels", "greater than or equal to 1"),
        (nccl({"channels": 65}), "system.nccl.channels", "less than or equal to 64"),
        (nccl({"channels": "many"}), "system.nccl.channels", "integer"),
        (nccl({"arch": "hopper2"}), "system.nccl.arch", "'hopper'"),
        (nccl({"algorithms": "ring"}), "system.nccl.algorithms", "did you mean 'algorithm'"),
        (nccl({"algorithm": "nvls"}, NVSWITCH), "system.nccl.algorithm", "in_network_reduction: true"),
        (nccl({"algorithm": "nvls_tree"}, NVSWITCH), "system.nccl.algorithm", "picks per dimension"),
        (nccl({"multi_node": "yes"}), "system.nccl.multi_node", "boolean"),
        (nccl({"multi_node": True}), "system.nccl.multi_node", "later topology dimension"),
        (
            nccl({"multi_node": True, "algorithm": ["auto", "ring"]}, [*REDUCING, *NVSWITCH]),
            "system.nccl.multi_node",
            "give one algorithm",
        ),
        (
            nccl({"multi_node": True, "algorithm": "nvls_tree"}, [*NVSWITCH, *NVSWITCH]),
            "system.nccl.algorithm",
            "mark the first dimension in_network_reduction: true",
        ),
        (nccl({"pxn": "sometimes"}), "system.nccl.pxn", "boolean"),
        (nccl({"pxn": True}, [*REDUCING, *NVSWITCH]), "system.nccl.pxn", "needs rails"),
        (
            nccl({"pxn": True, "multi_node": True}, [{**NVSWITCH[0], "size": 1}, *NVSWITCH]),
            "system.nccl.pxn",
            "a node of several GPUs",
        ),
        (nccl({"algorithm": "collnet_direct"}), "system.nccl.algorithm", "a list per dimension"),
        (
            nccl({"algorithm": ["auto", "collnet_chain"]}, [*REDUCING, *NVSWITCH]),
            "system.nccl.algorithm",
            "dimension 1",
        ),
        (
            nccl({"algorithm": ["auto", "nvls"]}, [*REDUCING, *REDUCING]),
            "system.nccl.algorithm",
            "first dimension only",
        ),
        (
            nccl(topology=[{**REDUCING[0], "kind": "ring"}]),
            "network.topology[0]",
            "only a switch reduces data in the network",
        ),
        (
            nccl(topology=[{**REDUCING[0], "in_network_reduction": "yes"}]),
            "network.topology[0].in_network_reduction",
            "boolean",
        ),
        (
            study(
                system={"algorithm": "nccl"},
                network={"topology": {"kind": "fat_tree", "k": 4, "bandwidth": "1GB/s", "latency": "1us"}},
            ),
            "system.algorithm",
            "list of dimensions",
        ),
        (
            study(system={"algorithm": "nccl", "logical_topology": [4, 8]}),
            "system.algorithm",
            "drop logical_topology",
        ),
    ],
)
def test_each_bad_nccl_value_names_its_key(data: dict[str, Any], path: str, fragment: str) -> None:
    found = problems(data)
    assert path in found, found
    assert fragment in found[path], found[path]


def test_nvls_on_a_reducing_switch_and_auto_anywhere_are_fine() -> None:
    parse_study(nccl({"algorithm": "nvls", "protocol": "simple", "channels": 16}), "study.yaml")
    parse_study(nccl(topology=NVSWITCH), "study.yaml")
    parse_study(nccl({"algorithm": ["nvls", "collnet_chain"]}, [*REDUCING, *REDUCING]), "study.yaml")
    parse_study(nccl({"multi_node": True, "algorithm": "nvls_tree"}, [*REDUCING, *NVSWITCH]), "study.yaml")


def test_multi_node_given_as_a_word_ends_the_run_with_one_message() -> None:
    example = str(ROOT / "examples" / "nccl" / "allreduce_2x8xh100.yaml")
    done = stratasim_process("run", example, "--set", "system.nccl.multi_node=sometimes")
    assert_one_clear_message(done.returncode, done.stderr, "system.nccl.multi_node", "boolean")


def test_nvls_forced_on_a_plain_switch_ends_the_run_with_one_message() -> None:
    example = str(ROOT / "examples" / "nccl" / "allreduce_8xh100.yaml")
    done = stratasim_process(
        "run", example, "--set", "network.topology.0.in_network_reduction=false", "--set", "system.nccl.algorithm=nvls"
    )
    assert_one_clear_message(done.returncode, done.stderr, "system.nccl.algorithm", "in_network_reduction: true")


def test_a_forced_pick_nccl_cannot_run_is_one_message() -> None:
    example = str(ROOT / "examples" / "nccl" / "allreduce_8xh100.yaml")
    done = stratasim_process("run", example, "--set", "system.nccl.algorithm=pat")
    assert_one_clear_message(done.returncode, done.stderr, "system.nccl", "cannot run all_reduce with algorithm pat")


def test_pxn_on_one_node_ends_the_run_with_one_message() -> None:
    example = str(ROOT / "examples" / "nccl" / "allreduce_8xh100.yaml")
    done = stratasim_process("run", example, "--set", "system.nccl.pxn=true")
    assert_one_clear_message(done.returncode, done.stderr, "system.nccl.pxn", "needs rails")


def test_pat_across_nodes_of_several_gpus_is_one_message() -> None:
    example = str(ROOT / "examples" / "nccl" / "allreduce_2x8xh100.yaml")
    done = stratasim_process(
        "run", example, "--set", "workload.collective=all_gather", "--set", "system.nccl.algorithm=pat"
    )
    assert_one_clear_message(done.returncode, done.stderr, "system.nccl", "PAT runs with one GPU per node")
