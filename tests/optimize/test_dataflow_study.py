"""The optimal mapping of a kind: dataflow study, simulated: examples/optimize's HPL, FFT and GPT layer studies, and
the bad input the optimiser refuses with one message.

Where the estimate's assumptions hold — one chunk a collective (``system.splits: 1``), compute and conversions
serialised (``overlap`` off), no pipeline, no backward pass — the simulated time equals the estimate to the
picosecond's rounding. The GPT layer's training pipeline breaks two of them; its bound is derived in its test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config.study_file import Study, load_study
from stratasim.kernel.errors import StrataSimError
from stratasim.optimize.dataflow_costs import DataflowCosts
from stratasim.optimize.dataflow_roles import fixed_roles, ordered_roles
from stratasim.optimize.dataflow_study import DataflowStudyError, dataflow_problem, optimize_dataflow_study
from stratasim.optimize.inter_chip import InterChipError
from stratasim.optimize.milp import SolverError
from stratasim.workload_layer.dataflow.file import load_graph, save_graph
from stratasim.workload_layer.dataflow.generators.hpl import hpl_graph
from stratasim.workload_layer.dataflow.graph import GraphError
from stratasim.workload_layer.dataflow.mapping import MappingSection

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "optimize"
_ROUNDING_PS = 10
"""The estimate sums float picoseconds and rounds once; the engine sums whole ones."""


def _study(name: str, *overrides: str) -> Study:
    return load_study(EXAMPLES / f"{name}.yaml", overrides)


@pytest.mark.parametrize("name", ["hpl", "fft"])
def test_hpl_and_fft_simulate_as_estimated(name: str) -> None:
    """Inference graphs mapped without a pipeline, one chunk a collective: simulated = estimate."""
    result = optimize_dataflow_study(_study(name), objective="time", time_limit_s=60)
    assert result.status == "optimal"
    assert result.plan["workload.mapping.pp"] == 1
    assert result.simulated_ps is not None
    assert abs(result.simulated_ps - result.estimate_ps) <= _ROUNDING_PS
    assert sum(result.estimate_terms.values()) == pytest.approx(result.estimate_ps, abs=4)


def test_hpl_broadcasts_its_panels_over_every_device() -> None:
    """All 16 NPUs share each trailing update by block columns; the panels reach them by all-gathers."""
    result = optimize_dataflow_study(_study("hpl"), objective="time", time_limit_s=60, simulate=False)
    assert result.plan["workload.mapping.tp"] == 16
    assert all(
        scheme == "columns" for kernel, scheme in result.plan["workload.mapping.schemes"].items() if "update" in kernel
    )
    assert {c["kind"] for c in result.details["layout_collectives"]} == {"all_gather"}


def test_gpt_layer_gets_megatron_sharding_within_its_bound() -> None:
    """Megatron's sharding on the fast ring, four all-reduces a layer. The engine overlaps a backward conversion
    with the weight-gradient GEMM (it can only be faster there) and sends each stage boundary whole where the
    estimate sends a TP rank's share overlapped with compute: the fill and the drain cross ``2 (pp - 1)``
    boundaries, each at most ``B / bw + 2 latency`` on the switch (``B`` the layer's 16 MiB output). So the
    simulated time is below the estimate plus those, and within 2 % below it."""
    result = optimize_dataflow_study(_study("gpt_layer"), objective="time", time_limit_s=60)
    schemes = result.plan["workload.mapping.schemes"]
    assert (schemes["qkv"], schemes["attention projection"], schemes["mlp up"], schemes["mlp down"]) == (
        "n",
        "k",
        "n",
        "k",
    )
    assert result.plan["workload.mapping.tp"] == 4
    assert sorted(c["kind"] for c in result.details["layout_collectives"]) == ["all_reduce"] * 4
    pp = result.plan["workload.mapping.pp"]
    boundary_ps = 2 * (pp - 1) * (2048 * 4096 * 2 * 10**12 // 50 * 10**-9 + 2 * 2_000_000)
    assert result.simulated_ps is not None
    assert 0.98 * result.estimate_ps <= result.simulated_ps <= result.estimate_ps + boundary_ps


def test_overlap_estimates_no_longer_than_the_engine_runs() -> None:
    """DFModel's eq. 7 overlaps what the engine serialises: its estimate is a lower bound for the same plan."""
    result = optimize_dataflow_study(_study("fft"), objective="time", time_limit_s=60, overlap=True)
    assert result.simulated_ps is not None and result.estimate_ps <= result.simulated_ps + _ROUNDING_PS
    assert any(note.startswith("overlap:") for note in result.notes)


def test_perf_per_dollar_orders_as_time_on_fixed_hardware() -> None:
    timed = optimize_dataflow_study(_study("fft"), objective="time", time_limit_s=60, simulate=False)
    priced = optimize_dataflow_study(_study("fft"), objective="perf_per_dollar", time_limit_s=60, simulate=False)
    assert priced.plan == timed.plan
    assert priced.economics is not None and priced.economics["perf_per_dollar"] > 0
    assert any("price and power are fixed" in note for note in priced.notes)


def test_fixed_degrees_are_kept() -> None:
    result = optimize_dataflow_study(
        _study("gpt_layer", "workload.mapping.tp=4", "workload.mapping.dp=4", "workload.mapping.micro_batches=2"),
        objective="time",
        time_limit_s=60,
        simulate=False,
        keep_degrees=True,
    )
    assert (result.plan["workload.mapping.tp"], result.plan["workload.mapping.pp"]) == (4, 1)
    assert (result.plan["workload.mapping.dp"], result.plan["workload.mapping.micro_batches"]) == (4, 2)


def test_a_graph_with_a_cycle_is_named(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").write_text(
        "name: loop\nkernels:\n"
        "  - {name: a, kind: elementwise, elements: 1024}\n  - {name: b, kind: elementwise, elements: 1024}\n"
        "tensors:\n  - {from: a, to: b}\n  - {from: b, to: a}\n"
    )
    study = (EXAMPLES / "fft.yaml").read_text().replace("graph: fft.graph.json", "graph: loop.yaml")
    (tmp_path / "study.yaml").write_text(study)
    with pytest.raises(GraphError, match=r"loop.yaml.*cycle: a -> b -> a|cycle: b -> a -> b"):
        optimize_dataflow_study(load_study(tmp_path / "study.yaml"), objective="time", time_limit_s=10)


def test_a_model_that_fits_nowhere_names_memory() -> None:
    with pytest.raises(
        InterChipError, match=r"does not fit: the least memory any mapping needs is .* GiB per device against 0.5 GiB"
    ):
        optimize_dataflow_study(_study("gpt_layer", "system.memory_capacity=512MiB"), objective="time", time_limit_s=60)


def test_a_time_out_returns_the_best_mapping_and_its_gap(tmp_path: Path) -> None:
    """HPL in 8 runs takes HiGHS seconds a role order: a second's limit stops it with the best mapping found and
    a finite gap (zero when the limit falls after the last order's bound met its incumbent), or, on a fast machine,
    the optimum."""
    save_graph(hpl_graph(65536, 1024, 8), tmp_path / "hpl.graph.json")
    (tmp_path / "study.yaml").write_text((EXAMPLES / "hpl.yaml").read_text())
    result = optimize_dataflow_study(
        load_study(tmp_path / "study.yaml"), objective="time", time_limit_s=1.0, simulate=False
    )
    assert result.status in ("time_limit", "optimal")
    assert result.plan["workload.mapping.tp"] * result.plan["workload.mapping.pp"] == 16
    if result.status == "time_limit":
        assert 0 <= result.gap < float("inf")


def test_a_time_out_without_a_mapping_says_so() -> None:
    with pytest.raises(SolverError, match="no solution within its time limit"):
        optimize_dataflow_study(_study("hpl"), objective="time", time_limit_s=0, simulate=False)


def test_degrees_that_cannot_fill_the_topology_are_named() -> None:
    with pytest.raises(DataflowStudyError, match=r"workload.mapping: tp = 8, pp = 1, dp = 2 cannot fill .* 4 x 4"):
        optimize_dataflow_study(
            _study("fft", "workload.mapping.tp=8", "workload.mapping.dp=2"),
            objective="time",
            time_limit_s=10,
            keep_degrees=True,
        )


def test_another_workload_kind_is_refused() -> None:
    study = load_study(EXAMPLES.parent / "quickstart.yaml")
    with pytest.raises(StrataSimError, match="workload.kind: the dataflow optimiser needs kind: dataflow"):
        optimize_dataflow_study(study, objective="time", time_limit_s=10)


@pytest.mark.parametrize(
    ("degrees", "sizes", "roles"),
    [
        ((4, 4, 1), (4, 4), ("tp", "pp")),
        ((1, 1, 16), (4, 4), ("dp", "dp")),
        ((16, 1, 1), (4, 4), ("tp", "tp")),
        ((2, 4, 2), (2, 4, 2), ("tp", "pp", "dp")),
    ],
)
def test_kept_degrees_take_whole_dimensions_tp_innermost(
    degrees: tuple[int, int, int], sizes: tuple[int, ...], roles: tuple[str, ...]
) -> None:
    tp, pp, dp = degrees
    assert fixed_roles(MappingSection(tp=tp, pp=pp, dp=dp), sizes) == roles


def test_only_role_orders_the_engine_runs_are_searched() -> None:
    """TP never outside PP or DP on the dimensions: the workload numbers NPUs TP innermost, then PP, then DP."""
    study = _study("gpt_layer")
    with DataflowCosts(study, training=True) as costs:
        problem = dataflow_problem(study, load_graph(EXAMPLES / "gpt_layer.graph.json"), costs, 2**40, False, False)
    orders = ordered_roles(problem)
    assert ("pp", "tp") not in orders and ("dp", "tp") not in orders and ("dp", "pp") not in orders
    assert {("tp", "tp"), ("tp", "pp"), ("tp", "dp"), ("pp", "dp")} <= set(orders)


def test_a_kernel_cut_pipeline_is_written_as_stages_and_runs() -> None:
    """HPL kept at TP 4, PP 4 cuts its kernels into four stages (written as workload.mapping.stages). One
    micro-batch: the estimate counts ``pp`` steps at the slowest stage's pace, the engine each stage once and its
    sends, here well below that."""
    study = _study("hpl", "workload.mapping.tp=4", "workload.mapping.pp=4")
    result = optimize_dataflow_study(study, objective="time", time_limit_s=60, keep_degrees=True)
    stages = result.plan["workload.mapping.stages"]
    assert sorted(set(stages.values())) == [0, 1, 2, 3] and stages["panel 1"] == 0 and stages["solve"] == 3
    assert result.simulated_ps is not None and result.simulated_ps < result.estimate_ps
