"""The sweep key reference (docs/reference/sweep-keys.md) is current, gives every key a meaning and is in the
site's navigation."""

from __future__ import annotations

from pathlib import Path

from stratasim.explore.sweep_keys import markdown, undocumented

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "reference" / "sweep-keys.md"


def test_every_sweep_key_has_a_meaning() -> None:
    assert undocumented() == []


def test_the_committed_page_is_current() -> None:
    """Regenerate with ``python -m stratasim.explore.sweep_keys > docs/reference/sweep-keys.md``."""
    assert PAGE.read_text(encoding="utf-8") == markdown()


def test_the_page_covers_the_space_entry_forms_and_is_in_the_nav() -> None:
    text = markdown()
    for form in ("a range", "generator: parallelism", "generator: topology", "generator: accelerator"):
        assert f"`space.<name>` — {form}" in text
    assert "reference/sweep-keys.md" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
