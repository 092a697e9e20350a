"""Run a command on the installed layout: a temporary tree whose ``stratasim/`` links the repository's layer folders.

The layers keep their top-level folders in the repository but install as ``stratasim.<layer>`` (pyproject's
``package-dir``). Tools that find modules by walking folders — mypy, import-linter — cannot follow that mapping, so
this builds the installed layout from symbolic links and runs the tool there::

    python tools/installed_layout.py mypy --config-file pyproject.toml
    python tools/installed_layout.py lint-imports

Paths in the tool's output name the linked tree (``stratasim/system_layer/...`` is ``system_layer/...``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mapped_folders(root: Path = ROOT) -> dict[str, str]:
    """pyproject's ``package-dir``: installed package name → repository folder."""
    settings = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return dict(settings["package-dir"])


def build(tree: Path, root: Path = ROOT) -> Path:
    """Link the installed layout of ``root`` under ``tree``; returns ``tree``."""
    package = tree / "stratasim"
    package.mkdir(parents=True)
    for entry in (root / "stratasim").iterdir():
        (package / entry.name).symlink_to(entry)
    for name, folder in mapped_folders(root).items():
        if name != "stratasim":
            (tree / name.replace(".", "/")).symlink_to(root / folder)
    for config in ("pyproject.toml",):
        (tree / config).symlink_to(root / config)
    return tree


def run(command: list[str], root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a fresh linked tree of ``root`` with only that tree on the import path."""
    with tempfile.TemporaryDirectory(prefix="stratasim-layout-") as scratch:
        tree = build(Path(scratch) / "tree", root)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=900)


def main() -> int:
    done = run(sys.argv[1:])
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
