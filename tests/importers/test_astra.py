"""The ASTRA-sim importer: every reference network + system pair becomes the exact study expected, which
``parse_study`` accepts; every kind of bad input becomes one ConfigError naming the file and the key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.config.study_file import parse_study
from stratasim.importers.astra import import_astra, read_astra, to_yaml
from stratasim.kernel.errors import ConfigError
from tests.importers.conftest import RING_8
from tests.importers.reference_pairs import REFERENCE, dim

Files = Callable[..., tuple[Path, Path]]


@pytest.mark.parametrize(
    ("network", "system_file"), list(REFERENCE), ids=[pair[1] + "+" + pair[0] for pair in REFERENCE]
)
def test_reference_pair_gives_the_exact_study(inputs: Path, network: str, system_file: str) -> None:
    # halving_doubling and double_binary_tree must be in stratasim.system_layer.options.ALGORITHMS for the 3D case
    study = import_astra(inputs / network, inputs / system_file)
    topology, section = REFERENCE[(network, system_file)]
    assert study == {
        "name": Path(network).stem,
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "system": section,
        "network": {"backend": "analytical", "topology": topology},
    }
    parsed = parse_study(study, "imported")
    assert parsed.system.preset == "astra_compat"
    assert parsed.network.topology[0].bandwidth == float(topology[0]["bandwidth"].removesuffix("GiB/s")) * 2**30


def test_ring_8npus_values_and_units(inputs: Path) -> None:
    study = parse_study(import_astra(inputs / "network/Ring_8npus.yml", inputs / "system/Ring_4chunks.json"), "x")
    (ring,) = study.network.topology
    assert (ring.kind, ring.size, ring.bandwidth, ring.latency) == ("ring", 8, 50 * 2**30, 500_000)
    assert study.system.local_mem_bw == 1600e9
    assert (study.system.splits, study.system.active_chunks, study.system.endpoint_delay) == (4, 1, 10_000)
    assert study.system.scheduling == "lifo"
    assert study.system.collective_optimization == "local_bw_aware"


def test_hgx_h100_32gpu_tracks_local_memory_which_is_an_error(inputs: Path, tmp_path: Path) -> None:
    network, system_file = inputs / "network/hgx_h100_32gpu.yml", inputs / "system/hgx_h100_32gpu.json"
    with pytest.raises(ConfigError) as caught:
        import_astra(network, system_file)
    assert caught.value.source == str(system_file)
    assert [key for key, _ in caught.value.problems] == ["track-local-mem"]
    assert "no NPU ever finishes" in str(caught.value)

    fixed = tmp_path / "hgx_h100_32gpu.json"
    fixed.write_text(json.dumps({**json.loads(system_file.read_text()), "track-local-mem": 0}), encoding="utf-8")
    imported = read_astra(network, fixed)
    assert imported.study["network"]["topology"] == [
        dim("switch", 8, "400GiB/s", "936.25ns"),
        dim("ring", 4, "50GiB/s", "1000ns"),
    ]
    assert imported.study["system"]["endpoint_delay"] == "1ns"
    (ignored,) = [line for line in imported.comments if line.startswith("ignored ASTRA-sim keys: ")]
    assert "roofline-enabled: 1" in ignored and "peak-perf: 700" in ignored
    parse_study(imported.study, "imported")


def test_custom_collective_is_not_supported_yet(inputs: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        import_astra(inputs / "network/Ring_8npus.yml", inputs / "system/custom_collective.json")
    problems = dict(caught.value.problems)
    assert "not supported yet" in problems["all-reduce-implementation-custom"]
    assert "custom_allreduce" in problems["all-reduce-implementation-custom"]
    assert "collective-optimization" in problems  # absent: undefined in ASTRA-sim


def test_numbers_keep_their_digits(files: Files) -> None:
    network = "topology: [Ring, Switch]\nnpus_count: [4, 2]\nbandwidth: [12.5, 400]\nlatency: [936.25, 0]\n"
    study = import_astra(*files(network, local_mem_bw=50.5, endpoint_delay=0, all_reduce_implementation=["ring"] * 2))
    assert study["network"]["topology"] == [
        dim("ring", 4, "12.5GiB/s", "936.25ns"),
        dim("switch", 2, "400GiB/s", "0ns"),
    ]
    assert (study["system"]["local_mem_bw"], study["system"]["endpoint_delay"]) == ("50.5GB/s", "0ns")


def test_workload_options_and_name(files: Files) -> None:
    imported = read_astra(*files(), collective="all_gather", size="64MiB", npus=4, name="mine")
    assert imported.study["name"] == "mine"
    assert imported.study["workload"] == {"kind": "collective", "collective": "all_gather", "size": "64MiB", "npus": 4}
    assert not any(line.startswith("workload:") for line in imported.comments)
    in_bytes = read_astra(*files(), collective="all_gather", size=1048576)  # a Python int: bytes, written so
    assert in_bytes.study["workload"]["size"] == "1048576B"


def test_default_workload_is_said_in_a_comment(files: Files) -> None:
    imported = read_astra(*files())
    assert imported.study["name"] == "net"
    (said,) = [line for line in imported.comments if line.startswith("workload:")]
    assert "all_reduce" in said and "1MiB" in said


def test_defaults_and_ignored_keys_are_commented(files: Files) -> None:
    imported = read_astra(
        *files(endpoint_delay=None, active_chunks_per_dimension=None, boost_mode=1, trace_enabled=1, L=3, G=0.5)
    )
    assert (imported.study["system"]["endpoint_delay"], imported.study["system"]["active_chunks"]) == ("10ns", 1)
    text = "\n".join(imported.comments)
    assert "endpoint-delay 10 ns" in text and "active-chunks-per-dimension 1" in text
    assert "boost-mode: 1" in text and "trace-enabled: 1" in text
    assert "'L'" not in text and "G:" not in text  # only used with model-shared-bus: 1


def test_settings_that_do_not_matter_are_not_listed(files: Files) -> None:
    imported = read_astra(*files(roofline_enabled=0, peak_perf=900, intra_dimension_scheduling="FIFO"))
    assert not any(line.startswith("ignored") for line in imported.comments)


def test_to_yaml_round_trips_with_comments_on_top(files: Files) -> None:
    imported = read_astra(*files())
    text = to_yaml(imported.study, imported.comments)
    lines = text.splitlines()
    assert all(line.startswith("# ") for line in lines[: len(imported.comments)])
    assert "  - {kind: ring, size: 8, bandwidth: 50GiB/s, latency: 500ns}" in lines
    assert yaml.safe_load(text) == imported.study


def problems_of(files: Files, *args: Any, **kwargs: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        import_astra(*files(*args, **kwargs))
    return dict(caught.value.problems)


def test_missing_file(tmp_path: Path, files: Files) -> None:
    network, _ = files()
    with pytest.raises(ConfigError) as caught:
        import_astra(network, tmp_path / "nope.json")
    assert caught.value.source == str(tmp_path / "nope.json")
    assert caught.value.problems == [("", "no such file")]


def test_json_syntax_error_names_the_line(files: Files) -> None:
    problems = problems_of(files, system='{\n  "scheduling-policy": "LIFO",\n  "endpoint-delay": 10,,\n}')
    assert list(problems) == ["line 3, column 24"]
    assert problems["line 3, column 24"].startswith("invalid JSON")


def test_yaml_syntax_error_names_the_line(files: Files) -> None:
    problems = problems_of(files, "topology: [ Ring\nnpus_count: [ 8 ]\n")
    [(where, message)] = problems.items()
    assert where.startswith("line ") and message.startswith("invalid YAML")


@pytest.mark.parametrize(
    ("key", "closest"), [("endpoint-dealy", "'endpoint-delay'"), ("local-mem-bandwidth", "'local-mem-bw'")]
)
def test_unknown_system_key_names_the_closest(files: Files, key: str, closest: str) -> None:
    problems = problems_of(files, **{key: 10})
    assert closest in problems[key] and "closest known keys" in problems[key]


def test_unknown_network_key_names_the_closest(files: Files) -> None:
    problems = problems_of(files, RING_8 + "npu_count: [ 8 ]\n")
    assert "'npus_count'" in problems["npu_count"]


def test_mismatched_list_lengths(files: Files) -> None:
    problems = problems_of(files, "topology: [Ring, Ring]\nnpus_count: [4, 4]\nbandwidth: [50]\nlatency: [500, 500]\n")
    assert "one entry per dimension; got topology 2, npus_count 2, bandwidth 1, latency 2" in problems[""]


def test_network_values_need_lists_of_the_right_type(files: Files) -> None:
    problems = problems_of(files, "topology: Ring\nnpus_count: [1]\nbandwidth: [fast]\nlatency: [-1]\n")
    assert "such as [Ring]" in problems["topology"]
    assert "larger than 1" in problems["npus_count[0]"]
    assert "'fast'" in problems["bandwidth[0]"] and "2^30" in problems["bandwidth[0]"]
    assert "non-negative" in problems["latency[0]"]


def test_unknown_topology_kind(files: Files) -> None:
    problems = problems_of(files, RING_8.replace("Ring", "Torus"))
    assert "'Torus'" in problems["topology[0]"]


RING_2X4 = "topology: [Ring, Switch]\nnpus_count: [2, 4]\nbandwidth: [50, 50]\nlatency: [500, 500]\n"


@pytest.mark.parametrize(
    ("names", "algorithm"),
    [
        (["oneRing"], ["one_ring"]),
        (["oneRing", "oneRing"], ["one_ring"]),
        (["oneDirect"], ["one_direct"]),
        (["oneDirect4"], ["one_direct:4"]),
        (["oneHalvingDoubling", "oneHalvingDoubling"], ["one_halving_doubling"]),
        (["direct1", "direct4"], ["direct:1", "direct:4"]),
        (["direct2", "ring"], ["direct:2", "ring"]),
    ],
)
def test_flattened_and_windowed_algorithms_import(files: Files, names: list[str], algorithm: list[str]) -> None:
    imported = read_astra(*files(network=RING_2X4, all_reduce_implementation=names))
    assert imported.study["system"]["algorithm"]["all_reduce"] == algorithm
    parse_study(imported.study, "imported")


def test_a_flattened_algorithm_drops_the_entries_after_it_as_astra_sim_does(files: Files) -> None:
    imported = read_astra(*files(network=RING_2X4, all_reduce_implementation=["oneRing", "ring"]))
    assert imported.study["system"]["algorithm"]["all_reduce"] == ["one_ring"]
    assert any("ignores the entries after it" in line for line in imported.comments)


def test_a_flattened_algorithm_after_a_per_dimension_one_is_refused(files: Files) -> None:
    problems = problems_of(files, network=RING_2X4, all_reduce_implementation=["ring", "oneRing"])
    assert "'oneRing' after per-dimension algorithms" in problems["all-reduce-implementation[1]"]


@pytest.mark.parametrize(
    ("names", "index", "most"),
    [
        (["direct0"], 0, "up to 2"),
        (["direct2", "direct5"], 1, "up to 4"),
        (["oneDirect9"], 0, "up to 8"),
        (["oneDirect0"], 0, "up to 8"),
    ],
)
def test_a_window_outside_1_to_the_dimension_is_refused(files: Files, names: list[str], index: int, most: str) -> None:
    problems = problems_of(files, network=RING_2X4, all_reduce_implementation=names)
    said = problems[f"all-reduce-implementation[{index}]"]
    assert "N is the number of peers in flight" in said and most in said


@pytest.mark.parametrize("names", [["oneHalvingDoubling"], ["ring", "halvingDoubling"]])
def test_halving_doubling_for_an_all_to_all_workload_is_refused_at_its_key(files: Files, names: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        import_astra(*files(network=RING_2X4, all_to_all_implementation=names), collective="all_to_all")
    assert "HalvingDoubling has no all-to-all" in dict(caught.value.problems)["all-to-all-implementation"]


def test_unknown_algorithm_suggests_one(files: Files) -> None:
    problems = problems_of(files, all_gather_implementation=["halvingDoubing"])
    assert "did you mean 'halvingDoubling'?" in problems["all-gather-implementation[0]"]


def test_explicit_scheduling_is_not_supported_yet(files: Files) -> None:
    problems = problems_of(files, scheduling_policy="EXPLICIT")
    assert problems["scheduling-policy"].startswith("'EXPLICIT' is not supported yet")


@pytest.mark.parametrize("key", ["scheduling-policy", "collective-optimization", "preferred-dataset-splits"])
def test_keys_without_which_astra_sim_is_undefined(files: Files, key: str) -> None:
    assert problems_of(files, **{key: None})[key].startswith("required")


@pytest.mark.parametrize("key", ["replay-only", "model-shared-bus", "track-local-mem"])
def test_flags_that_change_results_are_errors(files: Files, key: str) -> None:
    assert "set to 1" in problems_of(files, **{key: 1})[key]


def test_wrong_types(files: Files) -> None:
    problems = problems_of(files, local_mem_bw="fast", preferred_dataset_splits=2.5, endpoint_delay=True)
    assert set(problems) == {"local-mem-bw", "preferred-dataset-splits", "endpoint-delay"}


def test_short_algorithm_list_for_the_workload_is_an_error_and_for_others_a_comment(files: Files) -> None:
    network = "topology: [Ring, Switch]\nnpus_count: [4, 2]\nbandwidth: [50, 25]\nlatency: [500, 1000]\n"
    two = ["ring", "ring"]
    args = dict(all_reduce_implementation=["ring"], all_gather_implementation=two, reduce_scatter_implementation=two)
    problems = problems_of(files, network, **args, all_to_all_implementation=two)
    assert "over the first 1 dimension(s) only" in problems["all-reduce-implementation"]

    imported = read_astra(*files(network, **args, all_to_all_implementation=two), collective="all_gather")
    assert any("all-reduce-implementation: 1 algorithm(s) for 2" in line for line in imported.comments)


def test_too_many_algorithms(files: Files) -> None:
    problems = problems_of(files, all_to_all_implementation=["ring", "ring"])
    assert "2 algorithms for 1 dimension(s)" in problems["all-to-all-implementation"]


def test_duplicate_keys(files: Files) -> None:
    assert "duplicate key" in problems_of(files, RING_8 + "latency: [ 1 ]\n").popitem()[1]
    assert problems_of(files, system='{"local-mem-bw": 1, "local-mem-bw": 2}') == {"": "duplicate key"}


def test_problems_in_both_files_are_raised_together(files: Files) -> None:
    with pytest.raises(ConfigError) as caught:
        import_astra(*files(RING_8 + "typo: 1\n", scheduling_policy="EXPLICIT"))
    assert " and " in caught.value.source
    assert {key.split(":")[0] for key, _ in caught.value.problems} == {"net.yml", "sys.json"}


def test_files_given_the_wrong_way_round(files: Files) -> None:
    network, system_file = files()
    with pytest.raises(ConfigError) as caught:
        import_astra(system_file, network)
    assert "not an ASTRA-sim network file" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("inter-dimension-scheduling", "offlineGreedy", "Themis's offline greedy dimension order"),
        ("inter-dimension-scheduling", "themis", "Themis's offline greedy dimension order"),
        ("inter-dimension-scheduling", "roundRobin", "round-robin rotation"),
        ("intra-dimension-scheduling", "smallestFirst", "smallest-chunk-first"),
        ("intra-dimension-scheduling", "SCF", "'SCF' is not a policy ASTRA-sim knows"),
    ],
)
def test_themis_scheduling_is_refused_naming_what_is_missing(files: Files, key: str, value: str, said: str) -> None:
    # ASTRA-sim 2.x never reads these keys (Sys::initialize_sys), so it runs FIFO / ascending whatever they say.
    problem = problems_of(files, **{key.replace("-", "_"): value})[key]
    assert said in problem and "StrataSim does not model" in problem and "ASTRA-sim 2.x does not read" in problem


@pytest.mark.parametrize(
    ("key", "value"), [("inter-dimension-scheduling", "ascending"), ("intra-dimension-scheduling", "FIFO")]
)
def test_the_scheduling_astra_sim_runs_is_accepted(files: Files, key: str, value: str) -> None:
    imported = read_astra(*files(**{key.replace("-", "_"): value}))
    parse_study(imported.study, "imported")


def test_a_double_binary_tree_on_a_line_that_is_not_a_power_of_two_is_refused(files: Files) -> None:
    network = "topology: [Ring, Switch]\nnpus_count: [6, 4]\nbandwidth: [50, 50]\nlatency: [500, 500]\n"
    problems = problems_of(files, network=network, all_reduce_implementation=["doubleBinaryTree", "doubleBinaryTree"])
    assert "needs a power of two NPUs, not 6" in problems["all-reduce-implementation[0]"]
    assert "all-reduce-implementation[1]" not in problems
