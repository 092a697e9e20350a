"""``stratasim trace reshard``: the transformer builder's Chakra trace exported at one TP and re-sharded to another
replays within 2 % of the trace exported at that TP directly (issue 31's must-show); what cannot be inferred is one
``error:`` line naming the option, file or node, and exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.chakra.et_def_pb2 import AttributeProto
from stratasim.config.study_file import parse_study
from stratasim.study.run import run_study
from stratasim.v1 import compute_pb2
from stratasim.workload_layer.traces.chakra import OP_ATTR, read_trace, write_trace
from tests.helpers import RunCli
from tests.workload_layer.transformer_helpers import GPT

LLAMA_LIKE = {
    **GPT,
    "heads": 8,
    "kv_heads": 4,
    "activation": "swiglu",
    "bias": False,
    "norm": "rmsnorm",
    "position_embedding": "rope",
    "tie_embeddings": False,
}
"""The small GPT with LLaMA's choices: grouped-query attention (2 query heads per KV head), SwiGLU, RMSNorm, RoPE."""


def study(tp: int, model: dict[str, Any] | None = None, **plan: Any) -> dict[str, Any]:
    """A study on tp ``tp`` x dp 2 NPUs (pp from ``plan``, default 1), two micro-batches per replica."""
    pp = plan.pop("pp", 1)
    parallelism = {"tp": tp, "pp": pp, "dp": 2, "schedule": "1f1b", "micro_batch": 1, "global_batch": 4, **plan}
    topology = [{"kind": "ring", "size": tp, "bandwidth": "300GB/s", "latency": "500ns"}]
    if pp > 1:
        topology.append({"kind": "ring", "size": pp, "bandwidth": "100GB/s", "latency": "1us"})
    topology.append({"kind": "switch", "size": 2, "bandwidth": "100GB/s", "latency": "1us"})
    return {
        "name": "reshard",
        "system": {"algorithm": "ring", "splits": 2},
        "workload": {"kind": "transformer", "model": model or GPT, "parallelism": parallelism},
        "network": {"backend": "analytical", "topology": topology},
        "compute": {"backend": "roofline", "device": "h100"},
    }


def export(run_cli: RunCli, folder: Path, name: str, data: dict[str, Any]) -> Path:
    """``data`` written as ``folder/name.yaml`` and exported as the Chakra trace ``folder/name``."""
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert run_cli("trace", "export", str(path), str(folder / name), "--to", "chakra")[0] == 0
    return folder / name


def replayed(data: dict[str, Any], prefix: Path) -> int:
    return run_study(parse_study({**data, "workload": {"kind": "chakra", "path": str(prefix)}}, "replay")).total_time_ps


@pytest.mark.parametrize(
    ("old", "new", "model", "plan"),
    [
        (2, 4, None, {}),  # the must-show: TP 2 split to TP 4
        (4, 2, None, {}),  # merged back
        (2, 4, LLAMA_LIKE, {}),  # grouped-query attention, SwiGLU, RMSNorm, RoPE
        (2, 4, None, {"sequence_parallel": True}),  # norms and residuals split on the tokens
        (2, 4, None, {"pp": 2, "global_batch": 8}),  # pipeline stages: send/recv peers renumbered
    ],
)
def test_a_resharded_trace_replays_within_2_percent_of_the_direct_export(
    run_cli: RunCli, tmp_path: Path, old: int, new: int, model: dict[str, Any] | None, plan: dict[str, Any]
) -> None:
    pp = plan.get("pp", 1)
    source = export(run_cli, tmp_path, "old", study(old, model, **plan))
    direct = export(run_cli, tmp_path, "new", study(new, model, **plan))
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", str(new), "--pp", str(pp),
        "--study", str(tmp_path / "old.yaml"),
    )  # fmt: skip
    assert (code, err) == (0, "") and f"wrote {new * pp * 2 + 1} files" in out
    target = study(new, model, **plan)
    assert replayed(target, tmp_path / "r") == pytest.approx(replayed(target, direct), rel=0.02)


@pytest.mark.parametrize(
    ("old_pp", "new_pp", "old_tp", "new_tp"), [(1, 2, 2, 2), (1, 2, 2, 4), (2, 1, 2, 2), (2, 4, 2, 2)]
)
def test_a_recut_pipeline_replays_within_2_percent_of_the_direct_export(
    run_cli: RunCli, tmp_path: Path, old_pp: int, new_pp: int, old_tp: int, new_tp: int
) -> None:
    source = export(run_cli, tmp_path, "old", study(old_tp, pp=old_pp, global_batch=8))
    direct = export(run_cli, tmp_path, "new", study(new_tp, pp=new_pp, global_batch=8))
    code, _, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", str(new_tp), "--pp", str(new_pp),
        "--study", f"{source}.yaml",
    )  # fmt: skip
    assert (code, err) == (0, "")
    target = study(new_tp, pp=new_pp, global_batch=8)
    assert replayed(target, tmp_path / "r") == pytest.approx(replayed(target, direct), rel=0.02)


def test_every_compute_node_prices_as_the_direct_export(run_cli: RunCli, tmp_path: Path) -> None:
    """Only the DP gradient sizes and the optimizer step differ (by the replicated norms' share), and the
    activation memory (kept as recorded)."""
    source = export(run_cli, tmp_path, "old", study(2))
    direct = export(run_cli, tmp_path, "new", study(4))
    run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "4", "--pp", "1", "--study", f"{source}.yaml")
    _, resharded = read_trace(tmp_path / "r.5.et")
    _, built = read_trace(f"{direct}.5.et")
    differing = {
        a.name
        for a, b in zip(resharded, built, strict=True)
        if [x for x in a.attr if x.name != "memory_bytes"] != [x for x in b.attr if x.name != "memory_bytes"]
    }
    assert differing == {"dp gradient all-reduce", "optimizer step"}


def test_a_tp_change_of_dp_alone_is_the_rescale(run_cli: RunCli, tmp_path: Path) -> None:
    source = export(run_cli, tmp_path, "old", study(2))
    assert run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "2", "--pp", "1", "--dp", "4")[0] == 0
    assert run_cli("trace", "rescale", str(source), str(tmp_path / "s"), "--npus", "8")[0] == 0
    for rank in range(8):
        assert read_trace(tmp_path / f"r.{rank}.et") == read_trace(tmp_path / f"s.{rank}.et")


def _rewrite(prefix: Path, change: Any) -> None:
    """Apply ``change`` to every node of every rank of the trace ``prefix``."""
    for file in prefix.parent.glob(f"{prefix.name}.*.et"):
        metadata, nodes = read_trace(file)
        for node in nodes:
            change(node)
        write_trace(file, metadata, nodes)


def _rename_operator(node: Any) -> None:
    for attr in node.attr:
        if attr.name == OP_ATTR:
            op = compute_pb2.OperatorDesc.FromString(attr.bytes_val)
            if op.name == "gelu":
                op.name = "mystery"
                attr.bytes_val = op.SerializeToString()


def _rename_node(node: Any) -> None:
    if node.id == 26:
        node.name = "warm-up"


def _drop_operators(node: Any) -> None:
    kept = [attr for attr in node.attr if attr.name != OP_ATTR]
    node.ClearField("attr")
    node.attr.extend(kept)


def _garble_operators(node: Any) -> None:
    for attr in node.attr:
        if attr.name == OP_ATTR:
            attr.CopyFrom(AttributeProto(name=OP_ATTR, bytes_val=b"\xff\xff\xff"))


@pytest.mark.parametrize(
    ("options", "change", "message"),
    [
        (["--tp", "2", "--pp", "3"], None, "--pp 3: the trace ({first}) holds 4 layers, which 3 stages cannot"),
        (["--tp", "2", "--pp", "2"], _rename_node, "{first}: node 26: not a pass of a micro-batch through a layer"),
        (["--tp", "8", "--pp", "1"], None, "{first}: node 30: its batch of heads (2) times the TP ratio 1/4"),
        (["--tp", "4", "--pp", "1", "--max-npus", "4"], None, "--tp 4 --pp 1 --dp 2: a re-sharded trace has a file"),
        (["--tp", "4", "--pp", "1"], _rename_operator, "{first}: node 35: its elementwise operator is not one whose"),
        (["--tp", "4", "--pp", "1"], _drop_operators, "{first}: node 26: a compute node without the operator"),
        (["--tp", "4", "--pp", "1"], _garble_operators, "{first}: node 26: attribute stratasim.op is not an operator"),
    ],
)
def test_what_cannot_be_inferred_is_refused(
    run_cli: RunCli, tmp_path: Path, options: list[str], change: Any, message: str
) -> None:
    source = export(run_cli, tmp_path, "old", study(2))
    if change is not None:
        _rewrite(source, change)
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), *options, "--study", f"{source}.yaml"
    )
    assert (code, out) == (2, "") and err.startswith("error: " + message.format(first=f"{source}.0.et")), err
    assert "Traceback" not in err and not list(tmp_path.glob("r.*"))


def test_a_tp_not_dividing_the_key_value_heads_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    source = export(run_cli, tmp_path, "old", study(2, LLAMA_LIKE))
    code, _, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "8", "--pp", "1", "--study", f"{source}.yaml"
    )
    assert code == 2 and "this TP does not divide the key-value heads" in err and err.count("\n") == 1


def test_zero_cannot_have_its_pipeline_recut(run_cli: RunCli, tmp_path: Path) -> None:
    source = export(run_cli, tmp_path, "old", study(2, zero=1))
    code, _, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "2", "--pp", "2", "--study", f"{source}.yaml"
    )
    assert (code, err) == (
        2,
        f"error: --pp 2: the trace ({source}.0.et) was recorded with ZeRO stage 1, whose per-layer collectives a "
        "new pipeline cut cannot place: export the study again with the new plan\n",
    )


def test_pricing_needs_a_study_and_options_are_checked(run_cli: RunCli, tmp_path: Path) -> None:
    source = export(run_cli, tmp_path, "old", study(2))
    code, _, err = run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "4", "--pp", "1")
    assert (code, err) == (
        2,
        "error: --study: re-sharding TP or EP splits or merges operators whose new durations must be priced, and no "
        "--study was given: name the study the trace was exported from (its compute section prices them)\n",
    )
    code, _, err = run_cli("trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "0", "--pp", "1")
    assert code == 2 and "--tp" in err and "Traceback" not in err
    code, _, err = run_cli("trace", "reshard", str(source), str(source), "--tp", "2", "--pp", "1", "--dp", "1")
    assert code == 2 and err.startswith(f"error: {source}.2.et exists")


@pytest.mark.parametrize(
    ("options", "changed"),
    [
        (["--tp", "2", "--pp", "1"], "--tp 2"),
        (["--tp", "1", "--pp", "2"], "--pp 2"),
        (["--tp", "1", "--pp", "1", "--dp", "4"], "--dp 4"),
        (["--tp", "1", "--pp", "1", "--schedule", "gpipe"], "--schedule gpipe"),
    ],
)
def test_expert_parallelism_is_refused_saying_why(
    run_cli: RunCli, tmp_path: Path, options: list[str], changed: str
) -> None:
    source = export(run_cli, tmp_path, "old", study(1, {**GPT, "experts": 4, "top_k": 2}, ep=2))
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), *options, "--study", f"{source}.yaml"
    )
    assert (code, out) == (2, "") and err.startswith(
        f"error: {changed}: the trace ({source}.0.et) was recorded with ep 2, whose TP, PP, DP and schedule are not "
        "re-sharded: a new TP changes the tokens each expert computes"
    ), err
    assert err.count("\n") == 1 and not list(tmp_path.glob("r.*"))
