"""``docs/reference/python-api.md`` runs as written: its Python blocks, in order, in one namespace, from the repository root."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "python-api.md"


def test_every_block_of_the_python_api_page_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) >= 5
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks):
        exec(compile(block, f"{PAGE.name} block {number}", "exec"), namespace)  # noqa: S102 - the page's own code
    assert namespace["faster"] is not None and len(namespace["times"]) == 3  # type: ignore[arg-type]
