"""Budgets before building: a study estimated beyond ``--max-memory`` or ``--max-events`` is refused before
anything is built — fast, in little memory, with a message naming what to reduce and how to raise the budget —
while every example and benchmark study fits the default budget and each workload's estimate stays above what it
really builds."""

from __future__ import annotations

import copy
import resource
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import stratasim
from stratasim.bench.collectives import BenchCase
from stratasim.bench.peers import AstraRun, import_case
from stratasim.bench.suite import SUITE, SuiteCase
from stratasim.bench.sweep_runs import SweepRun
from stratasim.cli import main as stratasim_main
from stratasim.config.study_file import load_study, parse_study
from stratasim.explore import ResultStore, run_sweep
from stratasim.explore.sweep_file import parse_sweep
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.study.budget import (
    DEFAULT_BUDGET,
    Budget,
    BudgetError,
    check_budget,
    estimate_study,
    long_run_note,
)
from stratasim.study.run import check_study, prepare_workload
from tests.helpers import stratasim_process

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
STUDIES = sorted(EXAMPLES.glob("*.yaml")) + sorted(EXAMPLES.glob("*/*.yaml"))
EVERY_STUDY = [path for path in STUDIES if path.parent.name != "explore"]

QUICKSTART: dict[str, Any] = {
    "name": "budget",
    "workload": {"kind": "collective", "collective": "all_reduce", "size": "1GiB"},
    "system": {"algorithm": "ring", "splits": 4},
    "network": {
        "topology": [
            {"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "500ns"},
            {"kind": "switch", "size": 4, "bandwidth": "25GB/s", "latency": "1us"},
        ]
    },
}

GPT3 = load_study(EXAMPLES / "gpt3_175b.yaml")


@contextmanager
def _allocating_little(limit: int = 64 * 2**20) -> Iterator[None]:
    """The block allocates at most ``limit`` bytes at its peak (Python's own allocations, traced): a refusal that
    built what it counts would not fit. Work, not wall time, so a loaded machine cannot fail it."""
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit, f"allocated {peak:,} bytes"


def _study(**changes: Any) -> dict[str, Any]:
    """:data:`QUICKSTART` with ``section__key=value`` changes (``dim1__size`` for a dimension's key)."""
    data = copy.deepcopy(QUICKSTART)
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        if section.startswith("dim"):
            data["network"]["topology"][int(section[3:])][key] = value
        else:
            data[section][key] = value
    return data


def _refused(data: dict[str, Any], *fragments: str, budget: Budget = DEFAULT_BUDGET) -> None:
    """Checking ``data`` is refused having built nothing of its size (a few MiB at most), its message holding
    ``fragments``."""
    with _allocating_little(), pytest.raises(BudgetError) as caught:
        check_study(parse_study(data, "huge.yaml"), budget)
    for fragment in fragments:
        assert fragment in str(caught.value)


@pytest.mark.parametrize("size", [125_000_000, 10**9 // 4, 2**28])
def test_billions_of_npus_are_refused_before_anything_is_enumerated(size: int) -> None:
    _refused(_study(dim1__size=size), "NPUs would need about", "reduce network.topology's sizes", "--max-memory")


@pytest.mark.parametrize("splits", [10**12, 10**9, 2**40])
def test_huge_splits_are_refused_for_their_events(splits: int) -> None:
    _refused(_study(system__splits=splits), "events, over the budget of 1e+09", "system.splits", "--max-events")


@pytest.mark.parametrize("repeat", [10**9, 10**8, 2**40])
def test_huge_repeats_are_refused_for_their_nodes(repeat: int) -> None:
    _refused(_study(workload__repeat=repeat), "graph nodes", "reduce workload.repeat", "--max-memory")


@pytest.mark.parametrize(
    "changes",
    [
        ["workload.model.layers=1000000", "workload.parallelism.pp=1", "workload.parallelism.dp=128"],
        ["workload.model.layers=9600000"],  # 600,000 layers a stage
        ["workload.parallelism.global_batch=1000000000000"],  # micro-batches
        ["workload.parallelism.global_batch=80000000"],
    ],
)
def test_huge_transformers_are_refused_before_building(changes: list[str]) -> None:
    with (
        _allocating_little(),
        pytest.raises(BudgetError, match=r"reduce workload\.model\.layers and workload\.parallelism\.global_batch"),
    ):
        check_study(load_study(EXAMPLES / "gpt3_175b.yaml", changes))


@pytest.mark.parametrize("size", ["1PiB", "100TiB", "10TiB"])
def test_flit_level_packets_of_huge_messages_are_refused(size: str) -> None:
    data = _study(workload__size=size)
    data["network"]["backend"] = "flit_level"
    _refused(data, "flit-level packets in flight", "network.flit's packet_flits")


@pytest.mark.parametrize("size", [1024, 4096, 8192])
def test_every_npu_on_shared_links_is_priced_by_its_messages(size: int) -> None:
    data = _study(dim1__size=size, system__splits=64)
    data["network"]["backend"] = "congestion_aware"
    _refused(data, "events", "system.splits, the topology's sizes")


def test_a_flattened_algorithm_is_priced_by_its_one_long_line() -> None:
    # 8 x 512 NPUs, 64 chunks: a ring per dimension sends 2(7 + 511) messages a chunk, within the budget;
    # one_ring runs 2(4096 - 1) a chunk over the whole topology: 4096 x 64 x 8190, over 10^9 events.
    fits = _study(dim1__size=512, system__splits=64, system__aggregate=False)
    check_study(parse_study(fits, "fits.yaml"))
    _refused({**fits, "system": {**fits["system"], "algorithm": "one_ring"}}, "events, over the budget of 1e+09")


def test_a_raised_budget_lets_a_study_through_and_a_lowered_one_refuses() -> None:
    data = _study(workload__repeat=10**6)
    _refused(data, "graph nodes")
    assert check_study(parse_study(data, "big.yaml"), Budget.of(max_memory=64 * 2**30)) == 32
    _refused(_study(), "events", budget=Budget.of(max_events=10))
    _refused(_study(), "memory", budget=Budget.of(max_memory=1024))


def test_the_python_api_takes_the_budget() -> None:
    with pytest.raises(BudgetError, match="max_events="):
        stratasim.run(_study(), max_events=10)
    with pytest.raises(BudgetError, match="max_memory="):
        stratasim.run(_study(), max_memory="1KiB")
    assert stratasim.run(_study(), max_memory="1GiB").total_time_ps > 0
    with pytest.raises(StrataSimError, match="max_events must be a positive whole number"):
        stratasim.run(_study(), max_events=-5)


@pytest.mark.parametrize("path", EVERY_STUDY, ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_every_example_fits_the_default_budget(path: Path) -> None:
    study = load_study(path)
    source, npus = prepare_workload(study)
    estimate = estimate_study(study, source, npus)
    assert estimate.memory <= DEFAULT_BUDGET.max_memory and estimate.events <= DEFAULT_BUDGET.max_events


# Serving studies build no graphs: their budget counts requests (tests/workload_layer/test_serving_study.py).
@pytest.mark.parametrize(
    "path",
    [p for p in EVERY_STUDY if ("megatron" not in p.parts or "gpt_18b" in p.name) and "serving" not in p.parts],
    ids=lambda path: str(path.relative_to(EXAMPLES)),
)
def test_the_estimate_is_above_what_is_built(path: Path) -> None:
    study = load_study(path)
    source, npus = prepare_workload(study)
    estimate = estimate_study(study, source, npus)
    graphs = source.graphs(npus)
    built = max(len(graphs[npu].nodes) for npu in range(min(npus, 64)))
    assert estimate.work.nodes >= built


def test_the_gpt3_estimate_is_conservative_but_not_wild() -> None:
    source, npus = prepare_workload(GPT3)
    estimate = estimate_study(GPT3, source, npus)
    report = stratasim.run(GPT3)
    assert estimate.simulated == report.result.simulated_npus == 16
    assert report.result.events_processed <= estimate.events <= 20 * report.result.events_processed


@pytest.mark.parametrize("sizes", [("125000000",), ("30000", "30000"), ("1073741823",)])
def test_check_answers_a_billion_npus_fast_in_little_memory(sizes: tuple[str, ...]) -> None:
    settings = [arg for index, size in enumerate(sizes) for arg in ("--set", f"network.topology.{index}.size={size}")]
    # At most 1 GiB of address space, so a check that built what it counts dies; the helper's timeout catches a
    # check that counts NPU by NPU (speed itself is the benchmarks' to measure).
    done = stratasim_process("check", "examples/quickstart.yaml", *settings, address_space=2**30)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.startswith("error: ")
    assert "NPUs would need about" in done.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "examples/quickstart.yaml", "--set", "workload.repeat=1000000000"], "reduce workload.repeat"),
        (["run", "examples/quickstart.yaml", "--max-events", "100"], "over the budget of 1e+02"),
        (["check", "examples/quickstart.yaml", "--max-memory", "16KiB"], "over the budget of 16 KiB"),
        (["run", "examples/quickstart.yaml", "--max-memory", "lots"], "--max-memory: cannot read 'lots' as a size"),
        (["run", "examples/quickstart.yaml", "--max-events", "1.5"], "--max-events: expected a whole number"),
        (
            ["trace", "export", "examples/quickstart.yaml", "out/q", "--to", "stratasim", "--max-memory", "64KiB"],
            "over the budget of 64 KiB",
        ),
        (["bench", "--study", "examples/quickstart.yaml", "--max-events", "10", "--json"], "over the budget of 10:"),
    ],
)
def test_the_command_line_sets_and_reports_the_budget(args: list[str], fragment: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stratasim", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert "Traceback" not in done.stderr and fragment in done.stderr + done.stdout
    assert done.returncode == (0 if args[0] == "bench" else 2)


@pytest.mark.parametrize("npus", [10**9, 10**7, 2**31])
def test_converting_a_text_workload_for_too_many_npus_is_refused(tmp_path: Path, npus: int) -> None:
    text = ROOT / "tests" / "data" / "astra-sim-inputs" / "workload" / "text_workloads" / "Resnet50_DataParallel.txt"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stratasim",
            "trace",
            "convert",
            str(text),
            str(tmp_path / "t"),
            "--to",
            "stratasim",
            "--npus",
            str(npus),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"converting for {npus:,} NPUs" in done.stderr and "reduce --npus or --passes" in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "space",
    [
        {"system.splits": {"low": 1, "high": 64, "count": 10**9}},
        {
            "system.splits": list(range(1, 1001)),
            "system.active_chunks": list(range(1, 1001)),
            "network.topology.0.latency": {"low": "1ns", "high": "1000ns", "count": 10**4},
        },
    ],
)
def test_a_sweep_of_a_billion_points_is_refused_before_listing_them(tmp_path: Path, space: dict[str, Any]) -> None:
    sweep = parse_sweep(
        {"study": QUICKSTART, "space": space, "objectives": [{"metric": "total_time_ns", "goal": "min"}]},
        "huge.yaml",
        tmp_path,
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BudgetError, match=r"trials would need about .* reduce the space's values"):
        run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (float("inf"), "inf is not a finite number"),
        (float("nan"), "nan is not a finite number"),
        (2**70, "does not fit a 64-bit integer"),
    ],
)
def test_a_sweep_number_that_fits_nothing_is_refused(tmp_path: Path, value: float, fragment: str) -> None:
    data = {
        "study": QUICKSTART,
        "space": {"system.splits": {"low": 1, "high": value, "count": 3}},
        "objectives": [{"metric": "total_time_ns", "goal": "min"}],
    }
    with pytest.raises(ConfigError) as caught:
        parse_sweep(data, "bad.yaml", tmp_path)
    assert caught.value.problems == [("space.system.splits.high", caught.value.problems[0][1])]
    assert fragment in caught.value.problems[0][1]


# A sweep's trials are each checked against the budget as the sweep runs them.
@pytest.mark.parametrize(
    "case", [case for case in SUITE if not isinstance(case.run, SweepRun)], ids=lambda case: case.name
)
def test_every_benchmark_case_fits_the_default_budget(case: SuiteCase, tmp_path: Path) -> None:
    run = case.run
    assert not isinstance(run, SweepRun)
    if isinstance(run, BenchCase):
        study = parse_study(run.study(), "<bench>")
    elif isinstance(run, AstraRun):  # the peer's inputs, imported as the suite does
        study = load_study(import_case(run, tmp_path))
    else:
        study = load_study(ROOT / run.path, run.overrides)
    source, npus = prepare_workload(study)
    assert check_budget(study, source, npus, DEFAULT_BUDGET).memory <= DEFAULT_BUDGET.max_memory


_LINK = {"bandwidth": "50GB/s", "latency": "1us"}
FABRICS = [
    {"kind": "nvswitch", "gpus_per_board": 8, "planes": 3_000_000, **_LINK},
    {
        "kind": "dragonfly",
        "groups": 4,
        "routers_per_group": 5000,
        "hosts_per_router": 1,
        "global_links_per_router": 1,
        "host_link": _LINK,
        "local_link": _LINK,
        "global_link": _LINK,
    },
]


@pytest.mark.parametrize("backend", ["congestion_aware", "flit_level"])
@pytest.mark.parametrize("fabric", FABRICS, ids=lambda fabric: fabric["kind"])
def test_fabrics_with_too_many_links_are_refused_before_building(backend: str, fabric: dict[str, Any]) -> None:
    """A few hundred bytes of fabric can ask a link-level network for tens of millions of links (it died of
    MemoryError after 20 s under a 3 GB limit): counted from the fields, they are refused first."""
    data = {
        "name": "fabric",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "network": {"backend": backend, "topology": fabric},
    }
    _refused(data, "links and switches of the", f"{backend} network", "network.topology's sizes")


def test_a_fabric_within_the_budget_still_runs() -> None:
    data = {
        "name": "fabric",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "network": {"backend": "congestion_aware", "topology": {**FABRICS[0], "planes": 6}},
    }
    assert check_study(parse_study(data, "small.yaml"), DEFAULT_BUDGET) == 8


def test_ns3_packets_of_huge_messages_are_refused_for_their_events() -> None:
    data = _study(workload__size="100TiB")
    check_study(parse_study(data, "analytical.yaml"))  # one event per message: nothing to refuse
    data["network"]["backend"] = "ns3"
    _refused(data, "the simulation", "system.splits")


def _exported(tmp_path: Path) -> Path:
    """The transformer example exported as a Chakra trace (32 ranks of some 2,540 nodes, 67 bytes each), and a study
    replaying it."""
    assert (
        stratasim_main(["trace", "export", str(EXAMPLES / "transformer.yaml"), str(tmp_path / "t"), "--to", "chakra"])
        == 0
    )
    text = (EXAMPLES / "transformer.yaml").read_text(encoding="utf-8")
    network = text[text.index("\nnetwork:") + 1 : text.index("\ncompute:") + 1]
    (tmp_path / "replay.yaml").write_text(
        f"workload: {{kind: chakra, path: t}}\nsystem: {{algorithm: ring}}\n{network}"
    )
    return tmp_path / "replay.yaml"


def test_a_chakra_replay_is_estimated_by_its_nodes(tmp_path: Path) -> None:
    """The transformer example's own export replays within the default budget (issue 27: its size bound said
    2.7 GiB; the run's peak is some 145 MB of which 60 MB the interpreter): the estimate counts the records."""
    study = load_study(_exported(tmp_path))
    source, npus = prepare_workload(study)
    estimate = check_budget(study, source, npus, DEFAULT_BUDGET)
    built = max(len(graph.nodes) for graph in source.graphs(npus))
    assert built <= estimate.work.nodes <= built + 1  # the metadata record counts as one
    assert estimate.npu_memory + estimate.graph_memory < 200e6


def test_a_trace_of_tiny_nodes_is_still_refused(tmp_path: Path) -> None:
    """Counting stops at COUNTED_RECORDS: a trace past it is bounded by its size, and 5-byte nodes are refused."""
    from stratasim.chakra import et_def_pb2 as et
    from stratasim.workload_layer.traces.chakra import write_trace
    from stratasim.workload_layer.traces.rank_files import COUNTED_RECORDS

    nodes = [et.Node(id=i) for i in range(1, COUNTED_RECORDS // 2 + 2)]
    for rank in range(4):
        write_trace(tmp_path / f"tiny.{rank}.et", et.GlobalMetadata(), nodes)
    (tmp_path / "s.yaml").write_text(
        "workload: {kind: chakra, path: tiny}\nnetwork:\n  topology: [{kind: switch, size: 4, bandwidth: 50GB/s, "
        "latency: 500ns}]\n"
    )
    study = load_study(tmp_path / "s.yaml")
    source, npus = prepare_workload(study)
    with pytest.raises(BudgetError, match="graph nodes"):
        check_budget(study, source, npus, DEFAULT_BUDGET)


@pytest.mark.parametrize(
    ("backend", "size", "said"),
    [("flit_level", "4MiB", "some 56 s"), ("flit_level", "64KiB", None), ("analytical", "1GiB", None)],
)
def test_a_long_packet_level_run_is_announced(backend: str, size: str, said: str | None) -> None:
    """Issue 27: the flit level runs some 60 times slower than analytical; a run predicted over LONG_RUN_SECONDS
    says so before it starts."""
    study = load_study(EXAMPLES / "quickstart.yaml", [f"network.backend={backend}", f"workload.size={size}"])
    source, npus = prepare_workload(study)
    line = long_run_note(study, estimate_study(study, source, npus))
    assert (line is None) if said is None else (line is not None and said in line and "flit_level" in line)


def test_the_command_line_says_it_before_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("stratasim.study.budget.PACKET_EVENTS_PER_SECOND", 1000)
    args = ["run", str(EXAMPLES / "quickstart.yaml"), "--quiet", "--set", "network.backend=flit_level"]
    assert stratasim_main([*args, "--set", "workload.size=16KiB"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: the flit_level network simulates every packet: about ") and err.count("\n") == 1
