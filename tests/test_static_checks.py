"""The packages type-check under mypy, pass ruff, and keep the import rules (all configured in pyproject.toml).

mypy and import-linter run on the installed layout (:mod:`tools.installed_layout`), where the layer folders sit
under ``stratasim/`` as they install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import installed_layout

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_mypy_finds_no_errors(tmp_path: Path) -> None:
    done = installed_layout.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")])
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_no_errors() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_code_is_formatted_by_ruff() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()", "--no-cache"]


def test_import_contracts_are_kept() -> None:
    done = installed_layout.run(LINT_IMPORTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _copy_sources(into: Path) -> Path:
    """The packages and pyproject.toml of the repository, copied so a test may break them."""
    for folder in {*installed_layout.mapped_folders().values()}:
        shutil.copytree(ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("network_layer/analytical.py", "from stratasim.cli import main"),  # a layer importing the composition root
        ("system_layer/options.py", "from stratasim.network_layer import topologies"),  # a layer importing a layer
        ("stratasim/kernel/units.py", "from stratasim.system_layer import result"),  # the kernel importing a layer
        ("adapters/zigzag.py", "from stratasim.workload_layer import collective"),  # an adapter beyond compute
    ],
)
def test_a_forbidden_import_breaks_a_contract(tmp_path: Path, module: str, forbidden: str) -> None:
    root = _copy_sources(tmp_path / "repo")
    with (root / module).open("a") as source:
        source.write(f"\n{forbidden}  # noqa\n")
    done = installed_layout.run(LINT_IMPORTS, root)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and forbidden.split()[1] in done.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        (  # the config package importing the study runner, which reads study files through config
            "stratasim/config/numbers.py",
            "from stratasim.study import run",
            "The composition root's packages import one another without cycles",
        ),
        (  # the bench's collective cases importing the suite built from them
            "stratasim/bench/collectives.py",
            "from stratasim.bench import suite",
            "Inside each package of the composition root, the modules import one another without cycles",
        ),
        (  # collective algorithms importing the engine that runs them
            "system_layer/collectives/algorithms.py",
            "from stratasim.system_layer.engine import simulation",
            "The system layer's packages and modules (collectives, scheduler, engine, symmetry...) import one another "
            "without cycles",
        ),
        (  # a library package importing the command line
            "stratasim/explore/results.py",
            "from stratasim.cli import arg_types",
            "The library never imports the command line (only stratasim.__main__ runs it)",
        ),
    ],
)
def test_a_planted_import_breaks_each_package_contract(
    tmp_path: Path, module: str, planted: str, contract: str
) -> None:
    root = _copy_sources(tmp_path / "repo")
    with (root / module).open("a") as source:
        source.write(f"\n{planted}  # noqa\n")
    done = installed_layout.run(LINT_IMPORTS, root)
    assert done.returncode != 0
    broken = " ".join(done.stdout.partition("Broken contracts")[2].split())  # long names wrap
    assert contract in broken, done.stdout
