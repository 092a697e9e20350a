"""``stratasim trace reshard --schedule``: the new pipeline runs its passes in the order the transformer builder
gives that schedule (:func:`pipeline_order`), every send has its receive, and the re-sharded trace replays within
2 % of the trace exported with that schedule directly; bad options are one ``error:`` line and exit code 2."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from stratasim.v1 import workload_pb2
from stratasim.workload_layer.traces.pipeline_cut import Schedule
from stratasim.workload_layer.traces.reshard import resharded
from stratasim.workload_layer.transformer.pipeline_schedule import Pass, pipeline_order
from tests.helpers import RunCli
from tests.workload_layer.test_trace_reshard import export, replayed, study

_BLOCK_PASS = re.compile(r"mb(\d+) (embedding|layer(\d+)|head) (fwd|bwd|wgt) ")
_DIRECTION = {"fwd": "forward", "wgt": "weight"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"pp": 2}, {"pp": 2, "schedule": "gpipe"}),
        ({"pp": 1}, {"pp": 2, "schedule": "interleaved", "virtual_stages": 2}),
        ({"pp": 2}, {"pp": 4, "schedule": "zb_h1"}),
        ({"pp": 2, "schedule": "zb_h1"}, {"pp": 2, "schedule": "1f1b"}),  # weight passes joined back
        ({"pp": 2, "schedule": "interleaved", "virtual_stages": 2}, {"pp": 4, "schedule": "1f1b"}),
    ],
)
def test_a_rescheduled_trace_replays_within_2_percent_of_the_direct_export(
    run_cli: RunCli, tmp_path: Path, old: dict[str, Any], new: dict[str, Any]
) -> None:
    source = export(run_cli, tmp_path, "old", study(2, global_batch=8, **old))
    target = study(2, global_batch=8, **new)
    direct = export(run_cli, tmp_path, "new", target)
    code, _, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "2", "--pp", str(new["pp"]),
        "--schedule", new["schedule"], "--virtual-stages", str(new.get("virtual_stages", 1)),
        "--study", f"{source}.yaml",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert replayed(target, tmp_path / "r") == pytest.approx(replayed(target, direct), rel=0.02)


def _passes(graph: workload_pb2.ExecutionGraph, blocks: list[list[str]], schedule: str) -> list[Pass]:
    """The passes ``graph`` runs, in node order: its blocks' nodes, each mapped to (direction, local chunk,
    micro-batch), consecutive repeats merged."""
    chunk_of = {block: chunk for chunk, chunk_blocks in enumerate(blocks) for block in chunk_blocks}
    found: list[Pass] = []
    for node in graph.nodes:
        matched = _BLOCK_PASS.match(node.name)
        if matched is None:
            continue
        direction = _DIRECTION.get(matched[4], "input" if schedule == "zb_h1" else "backward")
        step = Pass(direction, chunk_of[matched[2]], int(matched[1]))  # type: ignore[arg-type]
        if not found or found[-1] != step:
            found.append(step)
    return found


def _model_chunks(stage: int, pp: int, chunks: int, layers: int) -> list[list[str]]:
    """The blocks of ``stage``'s local chunks: model chunk ``c pp + stage`` of ``pp * chunks`` equal ones."""
    per, total = layers // (pp * chunks), pp * chunks
    positions = [chunk * pp + stage for chunk in range(chunks)]
    return [
        ["embedding"] * (g == 0) + [f"layer{j}" for j in range(g * per, (g + 1) * per)] + ["head"] * (g == total - 1)
        for g in positions
    ]


@pytest.mark.parametrize(("schedule", "chunks", "pp"), [("gpipe", 1, 4), ("interleaved", 2, 2), ("zb_h1", 1, 4)])
def test_each_stage_runs_the_schedules_order_and_every_send_is_received(
    run_cli: RunCli, tmp_path: Path, schedule: str, chunks: int, pp: int
) -> None:
    source = export(run_cli, tmp_path, "old", study(2, pp=2, global_batch=8))
    graphs, plan, _ = resharded(source, 2, pp, None, max_npus=64, schedule=Schedule(schedule, chunks))
    sends: Counter[tuple[int, int, int, int]] = Counter()
    receives: Counter[tuple[int, int, int, int]] = Counter()
    for graph in graphs:
        stage = plan.layout.rank(graph.npu, "pp")
        blocks = _model_chunks(stage, pp, chunks, 4)
        assert _passes(graph, blocks, schedule) == list(pipeline_order(schedule, stage, pp, 4, chunks))
        for node in graph.nodes:
            if node.type == workload_pb2.COMM_SEND_NODE:
                sends[(graph.npu, node.peer, node.tag, node.comm_bytes)] += 1
            elif node.type == workload_pb2.COMM_RECV_NODE:
                receives[(node.peer, graph.npu, node.tag, node.comm_bytes)] += 1
    # 4 pipelines (TP 2 x DP 2), a forward and a backward message per micro-batch (4) and model chunk boundary
    assert sends == receives and sum(sends.values()) == 4 * 2 * 4 * (pp * chunks - 1)


def test_without_a_schedule_the_recorded_order_stays(run_cli: RunCli, tmp_path: Path) -> None:
    source = export(run_cli, tmp_path, "old", study(2, pp=2, global_batch=8, schedule="gpipe"))
    graphs, _, _ = resharded(source, 2, 2, None, max_npus=64)
    assert _passes(graphs[0], _model_chunks(0, 2, 1, 4), "gpipe") == list(pipeline_order("gpipe", 0, 2, 4))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--pp", "2", "--schedule", "zb_h1", "--virtual-stages", "2"],
            "error: --virtual-stages 2: only --schedule interleaved runs several model chunks per stage, not zb_h1\n",
        ),
        (
            ["--pp", "2", "--virtual-stages", "2"],
            "error: --virtual-stages 2: only --schedule interleaved runs several model chunks per stage, not 1f1b\n",
        ),
        (
            ["--pp", "2", "--schedule", "interleaved", "--virtual-stages", "4"],
            "error: --pp 2 --virtual-stages 4: the trace ({first}) holds 4 layers, which 8 model chunks cannot "
            "share evenly (each a whole, equal number of layers)\n",
        ),
        (
            ["--pp", "4", "--schedule", "interleaved"],
            "error: --schedule interleaved: the interleaved schedule needs micro-batches (2) divisible by stages (4) "
            "(the trace's micro-batches per replica)\n",
        ),
    ],
)
def test_bad_schedule_options_are_one_message(
    run_cli: RunCli, tmp_path: Path, options: list[str], message: str
) -> None:
    source = export(run_cli, tmp_path, "old", study(2))
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "2", *options, "--study", f"{source}.yaml"
    )
    assert (code, out, err) == (2, "", message.format(first=f"{source}.0.et"))
    assert not list(tmp_path.glob("r.*"))


@pytest.mark.parametrize("options", [["--schedule", "dualpipe"], ["--virtual-stages", "0"]])
def test_a_bad_schedule_option_value_is_refused_by_the_parser(
    run_cli: RunCli, tmp_path: Path, options: list[str]
) -> None:
    code, _, err = run_cli("trace", "reshard", "in", str(tmp_path / "r"), "--tp", "2", "--pp", "2", *options)
    assert code == 2 and options[0] in err and "Traceback" not in err
