"""Training plans balanced to unlike devices (``parallelism.stage_layers`` and ``batch_split: by_device``): the
split follows the prices of one layer on each device, and the iteration shortens by what the hand calculation of
the per-stage and per-rank times says."""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import stratasim
from stratasim.compute_layer.roofline import RooflineCompute
from stratasim.config.study_file import parse_study
from stratasim.kernel.graph_blocks import unrolled
from stratasim.study.export import export_trace
from stratasim.system_layer.operators import OperatorPricer
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.convert import read_graphs
from stratasim.workload_layer.transformer.workload import TransformerWorkload
from tests.examples.test_studies import EXAMPLES

MODEL = {"layers": 8, "hidden": 1024, "heads": 16, "seq_len": 512, "vocab": 32000}
STUDY: dict[str, Any] = {
    "name": "h100-a100",
    "workload": {"kind": "transformer", "model": MODEL, "parallelism": {}},
    "network": {
        "backend": "analytical",
        "topology": [{"kind": "switch", "size": 2, "bandwidth": "1TB/s", "latency": "2us"}],
    },
    "compute": {"backend": "roofline", "device": "h100", "groups": [{"npus": "1", "device": "a100"}]},
}
LATENCY_PS = 2 * 10**6
BANDWIDTH = 10**12  # bytes/s
DP2 = {"tp": 1, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 24}
PP2 = {"tp": 1, "pp": 2, "dp": 1, "micro_batch": 1, "global_batch": 8, "schedule": "gpipe"}
DEVICES = ("h100", "a100")  # NPU 0's, NPU 1's


def _study(plan: dict[str, Any], **split: object) -> dict[str, Any]:
    study = copy.deepcopy(STUDY)
    study["workload"]["parallelism"] = {**plan, **split}
    return study


def _graphs(plan: dict[str, Any], **split: object) -> list[workload_pb2.ExecutionGraph]:
    """Each NPU's graph unrolled, for the plan with listed splits."""
    config = {"model": MODEL, "parallelism": {**plan, **split}}
    workload = TransformerWorkload(TransformerWorkload.Config.model_validate(config))
    return [unrolled(graph) for graph in workload.graphs(2)]


def _priced_ps(graph: workload_pb2.ExecutionGraph, device: str, prefix: str, part: str = "") -> int:
    """The roofline's price on ``device`` of ``graph``'s operators whose node names start with ``prefix`` (and
    hold ``part``)."""
    ops = [
        node.op
        for node in graph.nodes
        if node.type == workload_pb2.COMP_NODE and node.name.startswith(prefix) and part in node.name
    ]
    return sum(OperatorPricer(RooflineCompute(), device).durations_ps(ops))


def _layer_ps(device: str) -> int:
    """One layer's forward and backward pass over one micro-batch on ``device``."""
    return _priced_ps(_graphs(DP2)[0], device, "mb0 layer0 ")


def _h100_share(total: int) -> int:
    """Of ``total`` shares split between an H100 and an A100 in proportion to 1 / (a layer's time): the H100's
    quota ``total t_a / (t_h + t_a)``, rounded by largest remainder (between two places: to nearest, a half up)."""
    t_h, t_a = _layer_ps("h100"), _layer_ps("a100")
    return int(Fraction(total * t_a, t_h + t_a) + Fraction(1, 2))


def test_by_device_gives_the_h100_micro_batches_in_proportion_to_its_speed() -> None:
    """DP 2 across an H100 and an A100, 24 micro-batches: the H100 runs ``round(24 t_a / (t_h + t_a))`` of them.
    Each rank computes its micro-batches (``C_d``: every operator but the optimizer step's, priced by hand), then
    the gradient all-reduce and the optimizer step. The A100 joins the all-reduce last either way, long after the
    H100 (whose first ring step is done by then), so what follows its join is the same: the balanced iteration is
    shorter than the even one by exactly ``C_a(12) - C_a(m_a)``."""
    m_h = _h100_share(24)
    assert m_h > 12
    split = (m_h, 24 - m_h)
    balanced = stratasim.run(_study(DP2, batch_split="by_device"))
    assert balanced.training is not None
    assert balanced.training["work_split"] == {"stage_layers": [8], "micro_batches_per_dp_rank": list(split)}
    even = stratasim.run(_study(DP2))
    graphs = {"even": _graphs(DP2), "balanced": _graphs(DP2, batch_split=list(split))}
    compute = {
        name: [_priced_ps(graph, device, "mb") for graph, device in zip(graphs[name], DEVICES)] for name in graphs
    }
    assert all(h100 < a100 for h100, a100 in compute.values())
    assert even.total_time_ps - balanced.total_time_ps == compute["even"][1] - compute["balanced"][1]
    assert stratasim.run(_study(DP2, batch_split=list(split))).result == balanced.result


def _gpipe_ps(graphs: list[workload_pb2.ExecutionGraph], micro_batches: int) -> int:
    """GPipe over two stages, stage 1 the slower in both passes (``f_0 <= f_1``, ``b_0 <= b_1``: each stage's
    forward and backward pass over one micro-batch, priced by hand): stage 1 starts once the first activation has
    crossed (``f_0 + c``), then runs every forward and backward pass back to back and its optimizer step; stage 0
    ends one transfer and its last backward pass later, with its own optimizer step:
    ``f_0 + c + m (f_1 + b_1) + max(opt_1, c + b_0 + opt_0)``. A transfer of a micro-batch's activation (s h 2
    bytes) through the switch is two hops' latency and the bytes at the link's rate once."""
    forward = [_priced_ps(graph, device, "mb0 ", " fwd ") for graph, device in zip(graphs, DEVICES)]
    backward = [_priced_ps(graph, device, "mb0 ", " bwd ") for graph, device in zip(graphs, DEVICES)]
    optimizer = [_priced_ps(graph, device, "optimizer") for graph, device in zip(graphs, DEVICES)]
    assert forward[0] <= forward[1] and backward[0] <= backward[1]
    transfer = 2 * LATENCY_PS + MODEL["seq_len"] * MODEL["hidden"] * 2 * 10**12 // BANDWIDTH
    tail = max(optimizer[1], transfer + backward[0] + optimizer[0])
    return forward[0] + transfer + micro_batches * (forward[1] + backward[1]) + tail


def test_by_device_puts_more_layers_on_the_h100_stage() -> None:
    """Two pipeline stages, an H100's and an A100's, 8 layers: the H100 stage gets ``round(8 t_a / (t_h + t_a))``
    layers; each iteration takes what the GPipe formula over the priced stage times gives, the balanced one less."""
    first = _h100_share(8)
    assert first > 4
    layers = [first, 8 - first]
    balanced = stratasim.run(_study(PP2, stage_layers="by_device"))
    assert balanced.training is not None
    assert balanced.training["work_split"] == {"stage_layers": layers, "micro_batches_per_dp_rank": [8]}
    even = stratasim.run(_study(PP2))
    assert even.total_time_ps == _gpipe_ps(_graphs(PP2), 8)
    assert balanced.total_time_ps == _gpipe_ps(_graphs(PP2, stage_layers=layers), 8)
    assert balanced.total_time_ps < even.total_time_ps


def test_the_symmetry_shortcut_stays_exact_with_a_balanced_batch() -> None:
    """The mixed pods' example (TP 8 in each pod, DP 2 across) balanced: each DP rank stands for its own TP ranks,
    so the device groups follow the classes and 2 NPUs are simulated for 16, giving what simulating all gives."""
    path = str(EXAMPLES / "clusters" / "mixed_h100_a100.yaml")
    shortcut = stratasim.run(path, workload__parallelism__batch_split="by_device")
    every = stratasim.run(path, workload__parallelism__batch_split="by_device", system__aggregate=False)
    assert shortcut.simulated_npus == 2 and every.simulated_npus == 16
    assert shortcut.total_time_ps == every.total_time_ps == 459_996_995_931  # docs/how-to/heterogeneous-devices.md


def test_a_trace_export_writes_the_balanced_graphs(tmp_path: Path) -> None:
    """``stratasim trace export`` balances as a run does: the H100's trace runs its share of the micro-batches."""
    study = parse_study(_study(DP2, batch_split="by_device"), "balanced.yaml")
    export_trace(study, tmp_path / "trace", "stratasim")
    graphs = read_graphs(tmp_path / "trace")
    runs = [sum(1 for node in graph.nodes if node.name.endswith(" layer0")) for graph in graphs]
    m_h = _h100_share(24)
    assert runs == [2 * m_h, 2 * (24 - m_h)]
