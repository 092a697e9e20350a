"""The per-layer breakdown sums to the critical NPU's totals to the picosecond.

For every row set: sum over rows of ``compute_ps`` = the NPU's ``compute_ps``; of ``communication_ps`` = its
``comm_ps`` (time with a collective in flight); of ``exposed_ps`` = its ``exposed_comm_ps``; and per communicator,
the rows' exposed time = its ``exposed_comm_ps_by_kind`` entry. The cases: the transformer example (TP 4, PP 2 with
1F1B, DP 4), the MoE example (EP 8 all-to-alls, DP) and variants that run blocks node by node (a traced run),
recompute, ZeRO-3, interleaving and collectives slowing compute (``system.contention``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import stratasim
from stratasim.config.overrides import as_overrides
from stratasim.config.study_file import load_study
from stratasim.kernel.errors import StrataSimError
from stratasim.report.layers import LayerRow, layers_text
from stratasim.study.run import run_study
from stratasim.system_layer.result import NpuStats
from stratasim.workload_layer.transformer.node_names import Place, pass_span, place_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = {"workload.model.layers": 4, "workload.parallelism.global_batch": 8}
"""The transformer example cut to 4 layers and 8 samples (2 micro-batches per DP rank), to keep the tests quick."""


def _assert_sums(rows: tuple[LayerRow, ...], npu: NpuStats) -> None:
    assert rows, "a transformer training graph has a per-layer breakdown"
    assert sum(row.compute_ps for row in rows) == npu.compute_ps
    assert sum(row.communication_ps for row in rows) == npu.comm_ps
    assert sum(row.exposed_ps for row in rows) == npu.exposed_comm_ps
    exposed: Counter[str] = Counter()
    comm: Counter[str] = Counter()
    for row in rows:
        assert row.compute_ps >= 0 and row.communication_ps >= 0 and row.exposed_ps >= 0
        assert row.communication_ps == sum(ps for _, ps, _ in row.by_communicator)
        assert row.exposed_ps == sum(ps for _, _, ps in row.by_communicator)
        for label, comm_ps, exposed_ps in row.by_communicator:
            comm[label] += comm_ps
            exposed[label] += exposed_ps
    assert +exposed == +Counter(dict(npu.exposed_comm_ps_by_kind))
    assert sum(comm.values()) == npu.comm_ps


CASES = {
    "transformer": ("transformer.yaml", {}),
    "transformer traced": ("transformer.yaml", SMALL),
    "recompute full": ("transformer.yaml", {**SMALL, "workload.parallelism.recompute": "full"}),
    "recompute selective": ("transformer.yaml", {**SMALL, "workload.parallelism.recompute": "selective"}),
    "zero 3": ("transformer.yaml", {**SMALL, "workload.parallelism.zero": 3}),
    "interleaved": (
        "transformer.yaml",
        {**SMALL, "workload.parallelism.schedule": "interleaved", "workload.parallelism.virtual_stages": 2},
    ),
    "contention": ("transformer.yaml", {**SMALL, "system.contention": True}),
    "moe": ("moe_training_skew.yaml", {}),
    "moe traced": ("moe_training_skew.yaml", {}),
}


@pytest.mark.parametrize("case", CASES)
def test_rows_sum_to_the_critical_npus_totals(case: str, tmp_path: Path) -> None:
    study, overrides = CASES[case]
    report = stratasim.run(EXAMPLES / study, layers=True, **overrides)
    if case.endswith("traced"):  # blocks unrolled node by node (TP 1: compute fused across layers): the same rows
        settings = as_overrides(overrides)
        traced = run_study(load_study(EXAMPLES / study, settings), record_trace=True, layers=True)
        assert traced.engine is not None and traced.engine.trace_detail
        assert traced.layers == report.layers
    critical = report.critical
    assert critical is not None
    _assert_sums(report.layers, critical)
    for npu in report.per_npu:  # every simulated NPU's split sums too
        assert sum(node.compute_ps for node in npu.node_times) == npu.compute_ps
    data = json.loads(report.to_json())
    assert data["layers"] == report.to_dict()["layers"]
    blocks = {row["layer"] for row in data["layers"]}
    assert any(block.startswith("layer") for block in blocks) and blocks & {"embedding", "head"}


def test_the_passes_of_recomputation_and_pipelining() -> None:
    """Full recomputation shows a recompute pass per layer; a PP 2 run's first stage waits on the pipeline."""
    report = stratasim.run(
        EXAMPLES / "transformer.yaml", layers=True, **SMALL, **{"workload.parallelism.recompute": "full"}
    )
    places = {(row.layer, row.pass_) for row in report.layers}
    assert {("layer0", "forward"), ("layer0", "recompute"), ("layer0", "backward")} <= places
    pipeline = [row for row in report.layers if row.layer == "pipeline"]
    assert pipeline and all(dict((k, e) for k, _, e in row.by_communicator).keys() <= {"pp"} for row in pipeline)


def test_names_of_the_builder() -> None:
    assert place_of("mb3 layer12 fwd qkv") == Place("layer12", "forward")
    assert place_of("mb0 layer1 bwd recompute attention") == Place("layer1", "recompute")
    assert place_of("mb0 layer1 recompute tp all-reduce") == Place("layer1", "recompute")
    assert place_of("mb0 head bwd lm head dgrad") == Place("head", "backward")
    assert place_of("mb0 layer3 fwd zero all-gather") == Place("layer3", "forward")
    assert place_of("mb1 chunk0 recv backward") == Place("pipeline", "backward")
    assert place_of("dp expert gradient all-reduce") == Place("data parallel", "")
    assert place_of("optimizer step") == Place("optimizer", "")
    assert place_of("") == Place("other", "")
    assert pass_span("mb3 layer12 fwd qkv") == "mb3 layer12 forward"
    assert pass_span("mb0 layer1 bwd recompute attention") == "mb0 layer1 recompute"
    assert pass_span("mb2 layer4") == "mb2 layer4"  # a block node traced whole
    assert pass_span("mb1 chunk0 recv backward") is None and pass_span("optimizer step") is None


def test_no_breakdown_outside_transformer_graphs() -> None:
    report = stratasim.run(EXAMPLES / "quickstart.yaml", layers=True)
    assert report.layers == () and "layers" not in report.to_dict()
    assert layers_text(report.layers).startswith("no per-layer breakdown")


def test_off_unless_asked_and_the_same_figures() -> None:
    """Without ``layers`` the engine keeps no node times and the report no ``layers``; every figure is the same."""
    plain = stratasim.run(EXAMPLES / "transformer.yaml", **SMALL)
    asked = stratasim.run(EXAMPLES / "transformer.yaml", layers=True, **SMALL)
    assert plain.layers == () and "layers" not in plain.to_dict()
    assert all(npu.node_times == () for npu in plain.per_npu)
    assert asked.layers
    assert plain.per_npu == asked.per_npu and plain.total_time_ps == asked.total_time_ps
    assert plain.engine is not None and asked.engine is not None
    assert plain.engine.collectives == asked.engine.collectives


def test_layers_must_be_a_bool() -> None:
    with pytest.raises(StrataSimError, match="layers must be True or False"):
        stratasim.run(EXAMPLES / "quickstart.yaml", layers="yes")


def test_the_trace_has_a_layers_track_when_asked(tmp_path: Path) -> None:
    """With the breakdown asked for, each NPU's trace gains a ``layers`` track above its compute: a span per run of
    compute spans in one block pass of one micro-batch, from the run's first start to its last end; each pass's
    compute spans lie in its spans, which never overlap on a track (1F1B). Without it, no such track."""
    settings = as_overrides({**SMALL, "workload.parallelism.recompute": "full"})
    study = load_study(EXAMPLES / "transformer.yaml", settings)
    run_study(study, record_trace=True).write(tmp_path / "plain")
    run_study(study, record_trace=True, layers=True).write(tmp_path / "asked")
    plain = json.loads((tmp_path / "plain" / "trace.json").read_text(encoding="utf-8"))["traceEvents"]
    events = json.loads((tmp_path / "asked" / "trace.json").read_text(encoding="utf-8"))["traceEvents"]
    assert not [e for e in plain if e.get("cat") == "layers"]
    (tid,) = {e["tid"] for e in events if e.get("name") == "thread_name" and e["args"]["name"] == "layers"}
    assert [e for e in events if not (e.get("cat") == "layers" or (e["ph"] == "M" and e.get("tid") == tid))] == plain
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    for npu in {pid for pid, _ in names}:
        layer_spans = sorted(
            (e["ts"], e["ts"] + e["dur"], e["name"]) for e in spans if e["pid"] == npu and e["cat"] == "layers"
        )
        compute = [e for e in spans if e["pid"] == npu and names[npu, e["tid"]] == "compute"]
        assert layer_spans and all(
            end <= after + 1e-6 for (_, end, _), (after, _, _) in zip(layer_spans, layer_spans[1:])
        )
        for event in compute:
            label = pass_span(event["name"])
            if label is not None:
                assert any(
                    label == name and start <= event["ts"] and event["ts"] + event["dur"] <= end + 1e-9
                    for start, end, name in layer_spans
                )
        assert {name.split()[2] for _, _, name in layer_spans} == {"forward", "backward", "recompute"}
        firsts = {name: start for start, _, name in reversed(layer_spans)}
        for name, start in firsts.items():
            assert start == min(e["ts"] for e in compute if pass_span(e["name"]) == name)
