"""The command line imports only what the command needs (issue 32): ``--help``, every command's ``--help`` and
``--version`` import none of the engine, the explorer, serving or gRPC; ``check`` and the quickstart's ``run`` none
of what that study does not use. Each command runs in a fresh interpreter, which then lists ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = str(REPO / "examples" / "quickstart.yaml")

# Runs the command line on its arguments, its output thrown away, then prints its exit code and the modules loaded.
RUNNER = """
import json, os, sys
from stratasim.cli import main
sink, shown = open(os.devnull, "w"), sys.stdout
sys.stdout = sink
try:
    code = main(sys.argv[1:])
finally:
    sys.stdout = shown
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

NEVER = (
    "grpc",
    "stratasim.explore",
    "stratasim.workload_layer.serving",
    "stratasim.optimize.first_order",
    "stratasim.optimize.milp",
    "highspy",
    "matplotlib",
    "stratasim.network_layer.flit_level",
    "stratasim.adapters.ns3",
    "stratasim.remote.network_client",
    "rich",
)
"""Modules no command below imports: the explorer, serving, the optimiser, the plots, the flit level, ns-3,
gRPC, and rich (a run's progress line is drawn only on a terminal, after a second)."""

PARSING_ONLY = (
    *NEVER,
    "numpy",
    "pydantic",
    "yaml",
    "stratasim.config.study_file",
    "stratasim.study.run",
    "stratasim.study.budget",
    "stratasim.system_layer.engine",
    "stratasim.compute_layer.sections",
)
"""Modules building the command line does not import either: a study's sections and the engine."""


def _loaded(*argv: str) -> list[str]:
    """The modules a fresh interpreter has loaded once ``stratasim ARGV`` ran (which must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *argv], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome["code"] == 0, done.stderr
    modules: list[str] = outcome["modules"]
    return modules


def _among(modules: list[str], heavy: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are, or lie inside, one of ``heavy``."""
    return [name for name in modules if any(name == top or name.startswith(f"{top}.") for top in heavy)]


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("--version",), ("run", "--help"), ("sweep", "--help"), ("serve", "--help"), ("trace", "--help")],
    ids=" ".join,
)
def test_the_command_line_parses_without_the_engine(argv: tuple[str, ...]) -> None:
    assert _among(_loaded(*argv), PARSING_ONLY) == []


def test_check_imports_no_more_than_the_study_needs() -> None:
    assert _among(_loaded("check", QUICKSTART), NEVER) == []


def test_the_quickstart_runs_without_explorer_serving_or_grpc() -> None:
    loaded = _loaded("run", QUICKSTART)
    assert "stratasim.study.run" in loaded  # the runner itself, to show the list is the run's
    assert _among(loaded, NEVER) == []
