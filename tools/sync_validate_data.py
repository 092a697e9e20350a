"""Copy the repository files ``stratasim validate`` runs into ``stratasim/validate/data/`` (package data, so that
it runs from an installed wheel), as ``cases.yaml``'s ``copies`` lists them::

    python tools/sync_validate_data.py

tests/validate checks that every copy is identical to its original; run this after changing an original.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "stratasim" / "validate"


def copies() -> dict[str, str]:
    """Each file under ``data/`` with the repository file it copies (a folder listed stands for its files)."""
    listed: dict[str, str] = yaml.safe_load((HOME / "cases.yaml").read_text(encoding="utf-8"))["copies"]
    files = {}
    for copy, original in listed.items():
        folder = ROOT / original
        if folder.is_dir():
            files.update(
                {
                    f"{copy}/{path.relative_to(folder)}": str(path.relative_to(ROOT))
                    for path in sorted(folder.rglob("*"))
                    if path.is_file()
                }
            )
        else:
            files[copy] = original
    return files


def main() -> None:
    for copy, original in copies().items():
        target = HOME / "data" / copy
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / original, target)
        print(f"{original} -> {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
