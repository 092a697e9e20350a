"""The repository's layout: every package installed under ``stratasim``, described in one line, shown in the layout
page's tree (docs/architecture/layout.md), and every top-level folder in the README's map."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tools import installed_layout

ROOT = Path(__file__).resolve().parents[1]


def _package_folders() -> dict[str, Path]:
    """Installed package name → folder, for every folder with an ``__init__.py`` under a mapped folder."""
    found = {}
    for name, folder in installed_layout.mapped_folders().items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            relative = init.parent.relative_to(base).parts
            found[".".join((name, *relative))] = init.parent
    return found


def test_pyproject_lists_every_package_and_no_other() -> None:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert sorted(listed) == sorted(_package_folders())


def test_the_distribution_installs_one_top_level_name() -> None:
    top_level = importlib.metadata.distribution("stratasim").read_text("top_level.txt")
    assert top_level is not None and top_level.split() == ["stratasim"]


def test_every_package_says_in_its_docstring_what_lives_there() -> None:
    for name, folder in _package_folders().items():
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        if name in ("stratasim.v1", "stratasim.chakra"):  # generated wire modules
            continue
        assert docstring, f"{name} has no docstring"


def _layout_tree() -> list[str]:
    """The folders the layout page's tree names, as repository paths."""
    page = (ROOT / "docs" / "architecture" / "layout.md").read_text()
    block = page.split("```text", 1)[1].split("```", 1)[0]
    paths, parents = [], {}
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        for name in re.findall(r"(\S+)/(?=\s|$)", line.split("  ", 1)[0] if indent == 0 else line.strip()):
            prefix = parents.get(indent - 2, "") if indent else ""
            paths.append(f"{prefix}{name}/")
            parents[indent] = f"{prefix}{name}/"
    return paths


def test_the_layout_tree_matches_the_folders() -> None:
    named = _layout_tree()
    assert all((ROOT / path).is_dir() for path in named), [path for path in named if not (ROOT / path).is_dir()]
    for folder in _package_folders().values():
        relative = folder.relative_to(ROOT).as_posix() + "/"
        if relative.count("/") <= 2:
            assert relative in named, f"docs/architecture/layout.md's tree does not show {relative}"


def test_the_readme_map_names_every_top_level_folder() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout, so the tracked folders are unknown: {listed.stderr.strip()}")
    tracked = listed.stdout
    folders = {line.split("/", 1)[0] for line in tracked.splitlines() if "/" in line and not line.startswith(".")}
    assert folders, "git ls-files listed no folder"
    assert [folder for folder in sorted(folders) if f"`{folder}/`" not in readme] == []


def test_the_repository_tracks_no_symbolic_links() -> None:
    """A link committed by accident points into one machine's folders (a test's scratch copy of ``examples``,
    say) and breaks every other checkout."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert [line.split("\t", 1)[1] for line in listed.splitlines() if line.startswith("120000 ")] == []
