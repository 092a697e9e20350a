"""Bad input to a study's ``goodput`` section ends ``stratasim check`` or ``run`` with one clear message each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import RunCli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAINING = str(EXAMPLES / "transformer.yaml")  # one 80 ms iteration: cheap to run


@pytest.mark.parametrize(
    ("study", "override", "fragments"),
    [
        (TRAINING, "goodput.mtbf.npu=-5h", ("goodput.mtbf.npu", "must be positive", "-5h")),
        (TRAINING, "goodput.mtbf.node=0d", ("goodput.mtbf.node", "must be positive")),
        (TRAINING, "goodput.checkpoint.bandwidth=0GB/s", ("goodput.checkpoint.bandwidth", "positive")),
        (TRAINING, "goodput.checkpoint.interval=0", ("goodput.checkpoint.interval", "at least 1 step")),
        (TRAINING, "goodput.restart=soon", ("goodput.restart", "cannot read 'soon'")),
        (
            str(EXAMPLES / "quickstart.yaml"),
            "goodput.restart=10min",
            ("goodput: the goodput model needs a training workload", "remove the goodput section"),
        ),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_bad_goodput_input(
    run_cli: RunCli, command: str, study: str, override: str, fragments: tuple[str, ...]
) -> None:
    code, _, err = run_cli(command, study, "--set", override)
    assert code == 2
    assert err.startswith("error: ") and err.count("error: ") == 1
    for fragment in fragments:
        assert fragment in err


def test_an_interval_shorter_than_a_step(run_cli: RunCli) -> None:
    code, _, err = run_cli("run", TRAINING, "--set", "goodput.checkpoint.interval=0.01s")
    assert code == 2
    assert err.startswith("error: goodput.checkpoint.interval: 0.01s is shorter than one step (0.0798422s)")


def test_a_training_study_reports_its_goodput(run_cli: RunCli) -> None:
    code, out, _ = run_cli(
        "run", TRAINING, "--set", "goodput.checkpoint.interval=1h"
    )  # 3,600 / 0.0798 s: 45,088 whole steps
    assert code == 0
    assert "goodput          " in out and "checkpointing every 45,088 steps" in out
