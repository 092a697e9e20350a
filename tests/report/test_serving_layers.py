"""A serving study's per-layer breakdown sums to the run's priced iterations to the picosecond.

For each case, the rows' compute plus exposed communication equals the sum, over every iteration shape the run
priced, of how often it ran times its stages' times as its pool's pricer gives them (plus the expert parts', under
expert parallelism), priced again apart from the breakdown. The cases: the LLaMA-3 70B example at TP 8, the same
at TP 4 and PP 2 (pipeline transfers), the Mixtral example at EP 8 (all-to-alls) and the speculative example (a
draft model's blocks). Without ``layers`` the report is the same, byte for byte, less the breakdown.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.config.study_file import parse_study
from stratasim.kernel import registry
from stratasim.kernel.serving import Iteration
from stratasim.report.serving_layers import ServingLayerRow, serving_layers_text
from stratasim.study.budget import DEFAULT_BUDGET
from stratasim.study.run import run_study
from stratasim.study.serving import ServedRun, open_pricers, serve
from stratasim.study.serving_layers import phase_of
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.helpers import RunCli

SERVING = Path(__file__).resolve().parents[2] / "examples" / "serving"
FEW = {"count": 60}
"""Requests per case, to keep the tests quick."""

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "tp 8": ("llama3_70b_h100_tp8.yaml", {}),
    "tp 4 pp 2": ("llama3_70b_h100_tp8.yaml", {"tp": 4, "pp": 2}),
    "ep 8": ("mixtral_8x7b_h100_ep8.yaml", {}),
    "speculative": ("llama3_70b_h100_speculative.yaml", {}),
}


def _data(example: str, plan: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((SERVING / example).read_text())
    data["workload"]["requests"] |= FEW
    data["workload"]["pools"][0]["parallelism"] |= plan
    return data


def _served(data: dict[str, Any], trace: bool = False) -> tuple[ServedRun, PoolRun, ServingRequestsWorkload, Any]:
    study = parse_study(data, "the study mapping")
    config = ServingRequestsWorkload.Config.model_validate({k: v for k, v in data["workload"].items() if k != "kind"})
    workload = registry.load("workload", "serving")(config)
    runs: list[PoolRun] = []
    served = serve(study, workload, DEFAULT_BUDGET, runs=runs, layers=True, record_trace=trace)
    return served, runs[0], workload, study


def _priced_total(study: Any, workload: ServingRequestsWorkload, run: PoolRun) -> dict[str, int]:
    """Each pool's priced time over the run, from pricers opened afresh: each shape's stages summed, times its runs,
    and each expert part times its runs."""
    with ExitStack() as stack:
        opened = open_pricers(study, workload, stack)
        totals = {pool.name: 0 for pool in opened.pools}
        for (pool, shape), times in run.shape_runs.items():
            price = opened.pricers[pool](Iteration(shape, workload.works(shape, pool)))
            totals[opened.pools[pool].name] += times * sum(price if isinstance(price, tuple) else (price,))
        for (pool, group, member), times in run.expert_runs.items():
            totals[opened.pools[pool].name] += times * opened.pricers[pool].experts(workload.expert_work(group, member))
    return totals


@pytest.mark.parametrize("case", CASES)
def test_rows_sum_to_the_priced_iterations(case: str) -> None:
    data = _data(*CASES[case])
    served, run, workload, study = _served(data)
    rows: tuple[ServingLayerRow, ...] = served.layers
    assert rows
    busy: dict[str, int] = {}
    for row in rows:
        busy[row.pool] = busy.get(row.pool, 0) + row.busy_ps
        assert row.communication_ps == row.exposed_ps == sum(ps for _, ps, _ in row.by_communicator)
        assert row.compute_ps >= 0 and row.exposed_ps >= 0
    assert busy == _priced_total(study, workload, run)
    layers = data["workload"]["model"]["layers"]
    assert {f"layer{index}" for index in range(layers)} <= {row.layer for row in rows}
    labels = {label for row in rows for label, _, _ in row.by_communicator}
    plan = data["workload"]["pools"][0]["parallelism"]
    assert ("tp" in labels) == (plan["tp"] > 1)
    assert ("pp" in labels) == (plan.get("pp", 1) > 1)
    assert ("ep" in labels) == (plan.get("ep", 1) > 1)
    phases = {phase_of(shape) for _, shape in run.shape_runs}
    assert {row.phase for row in rows} - {"all"} == phases
    if case == "speculative":
        assert any(row.layer.startswith("draft layer") for row in rows)


def test_iterations_and_tokens_count_each_phase_once() -> None:
    served, run, _, _ = _served(_data(*CASES["tp 4 pp 2"]))
    for row in served.layers:
        shapes = [(shape, times) for (_, shape), times in run.shape_runs.items() if phase_of(shape) == row.phase]
        assert row.iterations == sum(times for _, times in shapes)
        assert row.tokens == sum(times * shape.tokens for shape, times in shapes)
    pipeline = [row for row in served.layers if row.layer == "pipeline"]
    assert pipeline and all(row.compute_ps == 0 and row.by_communicator[0][0] == "pp" for row in pipeline)
    assert "Per layer, serving" in serving_layers_text(served.layers)


def test_the_trace_lays_each_iterations_stage_parts_out_by_block() -> None:
    """The ``layers`` track: on each NPU, spans one after another (a stage runs one iteration at a time), their
    durations summing to the rows' time; each iteration's stage part ending when the stage handed it on."""
    served, run, _, _ = _served(_data(*CASES["tp 4 pp 2"]), trace=True)
    spans = served.layer_spans
    assert sum(span.end_ps - span.start_ps for span in spans) == sum(row.busy_ps for row in served.layers)
    firsts = {replica * 8 + stage * 4 for replica in range(4) for stage in range(2)}  # each stage's first NPU
    assert {span.npu for span in spans} == firsts
    ends = {end for record in run.record for end in record.stage_ends_ps}
    for npu in firsts:
        mine = sorted((span for span in spans if span.npu == npu), key=lambda span: span.start_ps)
        assert all(a.end_ps <= b.start_ps for a, b in zip(mine, mine[1:]))
        assert {span.end_ps for span in mine if span.name.startswith("head") or "layer39" in span.name} <= ends
    assert not _served(_data(*CASES["tp 4 pp 2"]))[0].layer_spans


def test_without_layers_the_report_is_the_same_less_the_breakdown() -> None:
    study = parse_study(_data(*CASES["tp 4 pp 2"]), "the study mapping")
    plain, broken_down = run_study(study), run_study(study, layers=True)
    assert not plain.serving_layers and broken_down.serving_layers
    off, on = plain.to_dict(), broken_down.to_dict()
    assert "layers" not in off and on.pop("layers")
    off.pop("wall_seconds"), on.pop("wall_seconds")
    assert json.dumps(off, sort_keys=True) == json.dumps(on, sort_keys=True)


def test_run_layers_prints_and_writes_the_serving_breakdown(run_cli: RunCli) -> None:
    """``run --layers`` on a serving study: the table after the text report, ``layers`` in the JSON; the text
    report itself unchanged, and no ``layers`` without the flag."""
    study, few = str(SERVING / "llama3_70b_h100_tp8.yaml"), ("--set", "workload.requests.count=20")
    code, plain, err = run_cli("run", study, *few)
    assert code == 0, err
    code, out, err = run_cli("run", study, *few, "--layers")
    assert code == 0, err
    text, _, table = out.partition("\nPer layer, serving")
    assert table and "Per layer" not in plain
    assert _without_wall(text.rstrip("\n")) == _without_wall(plain.rstrip("\n"))
    code, out, err = run_cli("run", study, *few, "--json")
    assert code == 0 and "layers" not in json.loads(out)
    code, out, err = run_cli("run", study, *few, "--json", "--layers")
    assert code == 0 and {row["phase"] for row in json.loads(out)["layers"]} >= {"decode"}


def _without_wall(text: str) -> str:
    """``text`` without its wall-time line, the one line two runs may differ in."""
    return "\n".join(line for line in text.splitlines() if "simulated in" not in line)
