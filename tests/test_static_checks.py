"""The packages type-check under mypy and pass ruff's error and bug checks (both configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_mypy_finds_no_errors(tmp_path: Path) -> None:
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_no_errors() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr
