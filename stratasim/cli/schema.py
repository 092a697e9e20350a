"""``stratasim schema``: the study file's JSON Schema (for editors), or the key reference (docs/reference/study-keys.md)."""

from __future__ import annotations

import argparse
import json
import sys

from stratasim.cli.arg_types import Subparsers
from stratasim.kernel.errors import StrataSimError

__all__ = ["add_schema"]


def _schema(args: argparse.Namespace) -> int:
    from stratasim.config.json_schema import study_schema  # every section's model: only when asked for
    from stratasim.config.key_reference import markdown

    text = markdown() if args.markdown else json.dumps(study_schema(), indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        raise StrataSimError(f"{args.out}: cannot write the schema: {exc.strerror or exc}") from None
    print(f"wrote {args.out}")
    return 0


def add_schema(subparsers: Subparsers) -> None:
    """``stratasim schema [--out FILE] [--markdown]``."""
    parser = subparsers.add_parser(
        "schema",
        help="print the study file's JSON Schema (for editors) or its key reference",
        description="Editors complete and check study files against it: write it with --out study.schema.json and "
        "start a study with '# yaml-language-server: $schema=study.schema.json'.",
    )
    parser.add_argument("--out", metavar="FILE", help="write it to FILE instead of stdout")
    parser.add_argument(
        "--markdown", action="store_true", help="the key reference (docs/reference/study-keys.md) instead"
    )
    parser.set_defaults(handler=_schema)
