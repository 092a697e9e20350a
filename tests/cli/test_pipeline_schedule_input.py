"""Impossible zero-bubble and DualPipe plans end ``stratasim check`` with one clear message naming the key, exit
code 2 and no traceback (run as a user would, in a child process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import stratasim_process

TRANSFORMER = str(Path(__file__).resolve().parents[2] / "examples" / "transformer.yaml")  # pp 2, 8 micro-batches


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (
            ["pp=3", "schedule=dualpipe"],
            "parallelism.schedule: dualpipe needs an even parallelism.pp (its two directions meet in the middle), "
            "got 3",
        ),
        (
            ["schedule=dualpipe", "global_batch=12"],
            "parallelism.schedule: dualpipe needs at least 2 * parallelism.pp = 4 micro-batches per pipeline, an "
            "even number",
        ),
        (
            ["schedule=zb_v", "virtual_stages=2", "global_batch=12"],
            "parallelism.schedule: zb_v needs at least 2 * parallelism.pp = 4 micro-batches per pipeline",
        ),
        (["schedule=zb_v"], "parallelism.schedule: zb_v runs two model chunks per stage in a V"),
        (["schedule=zb_h2", "pp=1"], "parallelism.schedule: zb_h2 fills a pipeline's warm-up with extra forward"),
        (["schedule_times=flops"], "parallelism.schedule_times: flops weighs the passes of the zb_h2 and zb_v"),
    ],
)
def test_impossible_schedule_gives_one_clear_message(overrides: list[str], fragment: str) -> None:
    arguments = [arg for override in overrides for arg in ("--set", f"workload.parallelism.{override}")]
    done = stratasim_process("check", TRANSFORMER, *arguments, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert "workload.parallelism" in done.stderr and fragment in done.stderr
