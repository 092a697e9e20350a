"""``stratasim trace reshard --ep``: the transformer builder's MoE trace exported at one EP and re-sharded to another
(its expert GEMMs re-batched, all-to-alls regrouped, expert gradients rescaled) replays within 2 % of the trace
exported at that EP directly; what cannot be inferred is one ``error:`` line saying what."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import RunCli
from tests.workload_layer.test_trace_reshard import export, replayed, study
from tests.workload_layer.transformer_helpers import GPT

MOE = {**GPT, "experts": 8, "top_k": 2}


def moe_study(ep: int, dp: int = 4, tp: int = 1, model: dict[str, Any] | None = None, **plan: Any) -> dict[str, Any]:
    """The small GPT with 8 experts (top 2; ``model`` keys added) on tp ``tp`` x dp ``dp`` NPUs at expert
    parallelism ``ep``."""
    data = study(tp, {**MOE, **(model or {})}, ep=ep, dp=dp, global_batch=2 * dp, **plan)
    data["network"]["topology"][-1]["size"] = dp
    return data


@pytest.mark.parametrize(
    ("old", "new", "plan"),
    [
        (2, 4, {}),  # fewer experts per rank, more tokens each
        (4, 2, {"dp": 8}),  # more experts per rank
        (2, 1, {}),  # every expert local: the all-to-alls dropped
        (2, 4, {"tp": 2, "sequence_parallel": True}),  # the routed tokens gathered over TP
    ],
)
def test_a_resharded_moe_trace_replays_within_2_percent_of_the_direct_export(
    run_cli: RunCli, tmp_path: Path, old: int, new: int, plan: dict[str, Any]
) -> None:
    source = export(run_cli, tmp_path, "old", moe_study(old, **plan))
    target = moe_study(new, **plan)
    direct = export(run_cli, tmp_path, "new", target)
    tp, dp = plan.get("tp", 1), plan.get("dp", 4)
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", str(tp), "--pp", "1", "--ep", str(new),
        "--study", f"{source}.yaml",
    )  # fmt: skip
    assert (code, err) == (0, "") and "wrote" in out and (tmp_path / f"r.{tp * dp - 1}.et").is_file()
    assert replayed(target, tmp_path / "r") == pytest.approx(replayed(target, direct), rel=0.02)


SKEWED = {"model": {"routing": {"skew": "zipf", "s": 1.2, "pad_to_capacity": False}}}


@pytest.mark.parametrize(
    ("old", "options", "message"),
    [
        (2, ["--ep", "4", "--tp", "2"], "--ep 4 --tp 2: only EP is re-sharded for a MoE trace ({first}), at its"),
        (
            2,
            ["--ep", "3"],
            "--ep 3: the trace ({first}) cannot be re-sharded: ep 3 does not divide dp 4 (the EP groups",
        ),
        (
            1,
            ["--ep", "2"],
            "--ep 2: the trace ({first}) cannot be re-sharded: it was recorded with ep 1: it has no MoE",
        ),
        (4, ["--ep", "2"], "--ep 2: the trace ({first}) cannot be re-sharded: it was recorded with ep = dp 4: it has"),
        (
            (2, {"zero": 1}),
            ["--ep", "4"],
            "--ep 4: the trace ({first}) cannot be re-sharded: it was recorded with ZeRO",
        ),
        ((2, SKEWED), ["--ep", "4"], "{first}: node 37: several expert up GEMMs in one pass (skewed routing): which"),
    ],
)
def test_what_cannot_be_inferred_is_one_message(
    run_cli: RunCli, tmp_path: Path, old: Any, options: list[str], message: str
) -> None:
    ep, plan = old if isinstance(old, tuple) else (old, {})
    source = export(run_cli, tmp_path, "old", moe_study(ep, **plan))
    code, out, err = run_cli(
        "trace", "reshard", str(source), str(tmp_path / "r"), "--tp", "1", "--pp", "1", *options,
        "--study", f"{source}.yaml",
    )  # fmt: skip
    assert (code, out) == (2, "") and err.startswith("error: " + message.format(first=f"{source}.0.et")), err
    assert err.count("\n") == 1 and not list(tmp_path.glob("r.*"))


def test_a_bad_ep_value_is_refused_by_the_parser(run_cli: RunCli, tmp_path: Path) -> None:
    code, _, err = run_cli("trace", "reshard", "in", str(tmp_path / "r"), "--tp", "1", "--pp", "1", "--ep", "0")
    assert code == 2 and "argument --ep: expected a degree, at least 1" in err and "Traceback" not in err
