"""The ASTRA-sim tutorial's "Traces in and out" commands (docs/tutorials/astra-sim.md), run as written from a
folder laid out like the repository's root: import ASTRA-sim's congestion-aware HGX-H100 inputs with its own trace (ASTRA-sim's 57426 cycles), export a
model-built workload to Chakra and replay it against the imported system (the model's own time: its
communication hides under compute on either network)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from stratasim import cli

ROOT = Path(__file__).resolve().parents[2]


def tutorial_commands() -> list[list[str]]:
    """The shell block of the tutorial's "Traces in and out" section, one argv per command (comments dropped)."""
    page = ROOT / "docs" / "tutorials" / "astra-sim.md"
    section = page.read_text(encoding="utf-8").split("## Traces in and out", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line, comments=True) for line in block.group(1).replace("\\\n", " ").splitlines()]


def test_the_tutorial_replays_traces_against_an_imported_system(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("tests", "examples"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)
    outputs = []
    for argv in tutorial_commands():
        assert argv[0] == "stratasim"
        code = cli.main(argv[1:])
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), (argv, err)
        outputs.append(out)
    imported, astra_trace, exported, replayed = outputs
    assert imported == "wrote hgx.yaml\n"
    assert "backend: congestion_aware" in (tmp_path / "hgx.yaml").read_text(encoding="utf-8")
    assert "(57426000 ps)" in astra_trace
    assert "traces/resnet50.7.et" in exported
    model = cli.main(["run", "examples/resnet50.yaml"])
    own = capsys.readouterr().out
    assert model == 0
    time = re.search(r"total time .*\((\d+) ps\)", own)
    assert time is not None and f"({time.group(1)} ps)" in replayed and "54 collectives" in replayed
