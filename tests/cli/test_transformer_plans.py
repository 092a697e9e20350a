"""Impossible transformer plans end ``stratasim check`` and ``stratasim run`` with one clear message naming the
keys, exit code 2 and no traceback; run as a user would, in a child process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import stratasim_process

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMER = str(ROOT / "examples" / "transformer.yaml")  # tp 4, pp 2, dp 4 on a 4 x 2 x 4 topology


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["workload.parallelism.dp=8"], ["workload needs 64 NPUs but the topology has 32 (network.topology)"]),
        (["workload.parallelism.dp=2"], ["its plan runs on 16 NPUs but the topology (network.topology) has 32"]),
        (["workload.parallelism.tp=3"], ["workload:", "model.heads (16) must be divisible by parallelism.tp (3)"]),
        (["workload.model.kv_heads=2"], ["model.kv_heads (2) must be divisible by parallelism.tp (4)"]),
        (
            ["workload.model.experts=4", "workload.parallelism.ep=2"],
            ["workload.parallelism:", "parallelism.ep (2) with parallelism.tp (4) needs parallelism.sequence_parallel"],
        ),
    ],
)
def test_impossible_plan_gives_one_clear_message(command: str, overrides: list[str], fragments: list[str]) -> None:
    done = stratasim_process(
        command, TRANSFORMER, *(arg for override in overrides for arg in ("--set", override)), timeout=120
    )
    code, stderr = done.returncode, done.stderr
    assert code == 2 and stderr.startswith("error: ") and "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in stderr


def test_a_plan_with_every_feature_checks() -> None:
    overrides = [
        "workload.model.kv_heads=4",
        "workload.model.activation=swiglu",
        "workload.model.experts=4",
        "workload.model.moe_every=2",
        "workload.parallelism.ep=2",
        "workload.parallelism.sequence_parallel=true",
        "workload.parallelism.recompute=selective",
        "workload.parallelism.zero=1",
    ]
    done = stratasim_process(
        "check", TRANSFORMER, *(arg for override in overrides for arg in ("--set", override)), timeout=120
    )
    code, stderr = done.returncode, done.stderr
    assert (code, stderr) == (0, "")
