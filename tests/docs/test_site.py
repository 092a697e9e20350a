"""The documentation site builds with ``mkdocs build --strict`` and without a single warning (the ``docs`` extra)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="MkDocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="Material for MkDocs is not installed: pip install -e '.[docs]'")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    log = built.stdout + built.stderr
    assert built.returncode == 0, log
    assert "WARNING" not in log, log
    assert (tmp_path / "site" / "reference" / "study-keys" / "index.html").is_file()


def test_every_page_is_in_the_navigation() -> None:
    """A page left out of ``nav`` would build but be found by nobody (MkDocs only reports it at INFO level)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md"))
    assert [page for page in pages if page not in config] == []
