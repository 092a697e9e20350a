"""The report's operator table: one row per distinct priced operator, counted over all NPUs, with its cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config.study_file import load_study
from stratasim.kernel import operators
from stratasim.study.run import run_study
from stratasim.v1 import compute_pb2
from tests.compute_layer.profile_helpers import register_ops_workload

OPS_STUDY = """\
name: ops
workload: {kind: ops}
network:
  backend: analytical
  topology: [{kind: ring, size: 4, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: roofline, device: h100}
"""

SMALL_GPT = """\
name: small-gpt
workload:
  kind: transformer
  model: {layers: 2, hidden: 256, heads: 4, seq_len: 128, vocab: 1000}
  parallelism: {tp: 2, pp: 2, dp: 2, schedule: 1f1b, micro_batch: 1, global_batch: 4}
system: {aggregate: AGGREGATE}
network:
  backend: analytical
  topology:
    - {kind: ring, size: 2, bandwidth: 300GB/s, latency: 500ns}
    - {kind: ring, size: 2, bandwidth: 100GB/s, latency: 1us}
    - {kind: ring, size: 2, bandwidth: 50GB/s, latency: 2us}
compute: {backend: roofline, device: h100}
"""


def _price(op: compute_pb2.OperatorDesc) -> compute_pb2.OperatorCost:
    response = RooflineCompute().estimate(compute_pb2.EstimateRequest(device="h100", ops=[op]))
    return response.costs[0]


def test_rows_count_runs_over_all_npus_and_carry_the_backend_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_ops_workload(monkeypatch)
    path = tmp_path / "ops.yaml"
    path.write_text(OPS_STUDY, encoding="utf-8")
    data = run_study(load_study(str(path), [])).to_dict()
    rows = {row["kind"]: row for row in data["operators"]}
    gemm, scale = _price(operators.gemm(1536, 1024, 1024)), _price(operators.elementwise([2048, 1024]))
    assert rows["gemm"] == {
        "names": ["g1", "g2"],
        "kind": "gemm",
        "shape": [1536, 1024, 1024],
        "dtype": "bf16",
        "flops": 2 * 1536 * 1024 * 1024,
        "bytes": (1536 * 1024 * 2 + 1024 * 1024) * 2,
        "count": 8,
        "duration_ps": gemm.duration_ps,
        "duration_ns": gemm.duration_ps / 1000,
        "total_ns": 8 * gemm.duration_ps / 1000,
        "energy_pj": gemm.energy_pj,
        "bound": "compute",
        "traffic": {t.level: t.bytes for t in gemm.traffic},
        "basis": "fitted_to_runs",
    }
    assert rows["elementwise"]["names"] == ["scale"] and rows["elementwise"]["count"] == 4
    assert rows["elementwise"]["bound"] == "memory" and rows["elementwise"]["duration_ps"] == scale.duration_ps
    # Most total time first, and the study's energy is the rows' energy times their counts.
    assert [row["kind"] for row in data["operators"]] == ["gemm", "elementwise"]
    # The h100 preset's efficiencies are fitted to published whole-model runs: every kind says so.
    assert [(row["kind"], row["basis"]) for row in data["operator_kinds"]] == [
        ("gemm", "fitted_to_runs"),
        ("elementwise", "fitted_to_runs"),
    ]
    assert data["compute_energy_pj"] == pytest.approx(sum(row["count"] * row["energy_pj"] for row in rows.values()))


def test_text_shows_the_most_expensive_operators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    register_ops_workload(monkeypatch)
    path = tmp_path / "ops.yaml"
    path.write_text(OPS_STUDY, encoding="utf-8")
    text = run_study(load_study(str(path), [])).to_text()
    table = text[text.index("operators (2 distinct, most time first)") :].splitlines()
    assert table[2].split()[:5] == ["g1", "+1", "gemm", "1536x1024x1024", "8"]
    assert table[3].split()[:4] == ["scale", "elementwise", str(2048 * 1024), "4"]  # elements: the wire
    assert table[-1].startswith("  time by kind: gemm ") and table[-1].endswith("% (fitted to runs)")


def test_counts_are_the_same_whether_symmetric_npus_are_aggregated_or_not(tmp_path: Path) -> None:
    def operators_of(aggregate: bool) -> list[dict[str, object]]:
        path = tmp_path / f"gpt-{aggregate}.yaml"
        path.write_text(SMALL_GPT.replace("AGGREGATE", str(aggregate).lower()), encoding="utf-8")
        report = run_study(load_study(str(path), []))
        return report.to_dict()["operators"]  # type: ignore[no-any-return]

    aggregated, one_by_one = operators_of(True), operators_of(False)
    assert aggregated == one_by_one
    # Every NPU runs each layer's forward projection once per micro-batch: 8 NPUs x 1 layer x 4 micro-batches.
    qkv = [row for row in aggregated if "qkv" in row["names"] and row["kind"] == "gemm"]  # type: ignore[operator]
    assert qkv and sum(int(row["count"]) for row in qkv) >= 8 * 4  # type: ignore[call-overload]


REDUCING = """\
name: reducing
workload: {kind: collective, collective: all_reduce, size: 1MiB}
system: {reduction: compute, aggregate: AGGREGATE}
network:
  backend: analytical
  topology: [{kind: ring, size: 4, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: roofline, device: h100}
"""


def test_priced_reductions_are_operators_with_energy(tmp_path: Path) -> None:
    def run(aggregate: bool) -> dict[str, object]:
        path = tmp_path / f"reduce-{aggregate}.yaml"
        path.write_text(REDUCING.replace("AGGREGATE", str(aggregate).lower()), encoding="utf-8")
        data = run_study(load_study(str(path), [])).to_dict()
        for volatile in ("wall_seconds", "events_processed", "simulated_npus"):
            data.pop(volatile)
        return data

    data = run(True)
    assert data == run(False)
    (row,) = data["operators"]  # type: ignore[misc]
    # A ring all-reduce of 1 MiB on 4 NPUs: 3 reduce-scatter steps per NPU, each adding a quarter (128 Ki bf16).
    chunk = operators.elementwise([2**18 // 2], flops_per_element=1, inputs=2, name="reduction")
    cost = _price(chunk)
    assert row["names"] == ["reduction"] and row["shape"] == [2**17] and row["count"] == 4 * 3
    assert row["energy_pj"] == cost.energy_pj and data["compute_energy_pj"] == pytest.approx(12 * cost.energy_pj)
