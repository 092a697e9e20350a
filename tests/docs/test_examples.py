"""The README's and the tutorials' examples run as written (``tests/docs/blocks.py`` says how a page marks them).

Each page runs in a fresh folder laid out like the repository's root (``examples``, ``tests`` and ``tools`` linked
in), its blocks in order, so a command may read what an earlier one wrote. A block marked ``slow`` runs alone.
"""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim import cli
from tests.docs.blocks import Block, blocks, commands

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    ROOT / "docs" / "getting-started.md",
    *sorted((ROOT / "docs" / "tutorials").glob("*.md")),
    *sorted((ROOT / "docs" / "how-to").glob("*.md")),
    ROOT / "docs" / "validation" / "index.md",
    ROOT / "docs" / "validation" / "llama3-8b-h100.md",
]
_RUNS = ("console", "bash", "sh", "yaml")


def _cases() -> list[Any]:
    cases: list[Any] = []
    for page in PAGES:
        found = [block for block in blocks(page) if block.language in _RUNS and block.directive != "skip"]
        cases.append(pytest.param([b for b in found if b.directive != "slow"], id=page.name))
        cases += [pytest.param([b], id=b.label, marks=pytest.mark.slow) for b in found if b.directive == "slow"]
    return cases


@pytest.fixture
def repository_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working folder whose ``examples``, ``tests`` and ``tools`` are the repository's."""
    for folder in ("examples", "tests", "tools"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page_blocks", _cases())
def test_the_page_runs_as_written(
    page_blocks: list[Block], repository_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for block in page_blocks:
        if block.language == "yaml":
            _yaml(block, repository_folder, capsys)
        else:
            _shell(block, capsys)


def _shell(block: Block, capsys: pytest.CaptureFixture[str]) -> None:
    checker = doctest.OutputChecker()
    for command in commands(block):
        code = cli.main(command.argv)
        out, err = capsys.readouterr()
        assert code == 0, f"{block.label}: stratasim {' '.join(command.argv)} exited {code}: {err}"
        if command.expected and command.expected.strip():
            flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
            assert checker.check_output(command.expected, out, flags), (
                f"{block.label}: stratasim {' '.join(command.argv)} printed\n{out}\nnot what the page shows:\n"
                f"{command.expected}"
            )


def _yaml(block: Block, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = yaml.safe_load(block.text)
    if block.directive == "file":
        whole = yaml.safe_load((ROOT / block.argument).read_text(encoding="utf-8"))
        assert _within(shown, whole), f"{block.label}: the block is not what {block.argument} holds"
        return
    if block.directive == "base":
        shown = _merged(yaml.safe_load((ROOT / block.argument).read_text(encoding="utf-8")), shown)
        verb = "check"
    else:
        assert isinstance(shown, dict) and "workload" in shown, (
            f"{block.label}: a YAML block that is no whole study needs 'test: base PATH' or 'test: file PATH'"
        )
        verb = "run"
    study = folder / f"block_{block.line}.yaml"
    study.write_text(yaml.safe_dump(shown), encoding="utf-8")
    code = cli.main([verb, str(study)])
    out, err = capsys.readouterr()
    assert code == 0, f"{block.label}: stratasim {verb} of the block exited {code}: {err}{out}"


def _within(part: object, whole: object) -> bool:
    """Whether every key and value of ``part`` is in ``whole`` (mappings by key, anything else equal)."""
    if isinstance(part, dict) and isinstance(whole, dict):
        return all(key in whole and _within(value, whole[key]) for key, value in part.items())
    return part == whole


def _merged(base: object, part: object) -> object:
    """``base`` with ``part``'s keys set, mapping by mapping."""
    if isinstance(base, dict) and isinstance(part, dict):
        return {**base, **{key: _merged(base.get(key), value) for key, value in part.items()}}
    return part


def test_the_readme_keeps_its_two_set_up_commands() -> None:
    """The README's set-up commands, word for word: one installs and runs the quickstart, one installs and runs the
    test suite as CI does (``.ci/run``)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert f"```sh\n{venv}pip install . && stratasim run examples/quickstart.yaml\n```" in readme
    assert f"```sh\n{venv}pip install -e '.[test]' && pytest\n```" in readme
