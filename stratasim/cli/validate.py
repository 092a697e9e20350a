"""``stratasim validate``: the built-in regression of published and reference numbers (:mod:`stratasim.validate`),
printed as a table of expected, got, error and tolerance, or as JSON. Exit 0 when every row passes, 1 naming
the rows that failed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from stratasim.validate import Row, Suite, load_cases, validate

__all__ = ["handle", "EXIT_FAILED"]

EXIT_FAILED = 1
"""A row failed: the install, or a change, moved a number."""


def _number(value: float | None) -> str:
    """A figure as the table shows it: whole numbers with thousands separators, others to four digits."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _error(value: float | None) -> str:
    """A relative error in percent, tiny ones (an exact figure off by a picosecond) in scientific notation."""
    if value is None:
        return "-"
    return f"{100 * value:+.2f} %" if value == 0 or abs(value) >= 1e-4 else f"{100 * value:+.1e} %"


def to_text(rows: list[Row], suites: Sequence[Suite] = ()) -> str:
    """The rows as a table, one line each, suite by suite, then what each suite of ``suites`` reproduces."""
    head = ("row", "expected", "got", "error", "tolerance", "")
    lines = [
        (
            row.label,
            _number(row.expected),
            _number(row.got),
            _error(row.error),
            row.tolerance,
            "pass" if row.passed else f"FAIL{f': {row.problem}' if row.problem else ''}",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [head, *lines]) for i in range(5)]
    text = [f"{head[0]:<{widths[0]}}  " + "  ".join(f"{h:>{w}}" for h, w in zip(head[1:5], widths[1:])) + "  result"]
    text += [
        f"{line[0]:<{widths[0]}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(line[1:5], widths[1:])) + f"  {line[5]}"
        for line in lines
    ]
    shown = {row.suite for row in rows}
    text += ["", *(f"{suite.name}: {suite.title}" for suite in suites if suite.name in shown)]
    failed = sum(not row.passed for row in rows)
    text.append(f"\n{len(rows) - failed} of {len(rows)} rows pass" + (f", {failed} FAIL" if failed else ""))
    return "\n".join(text)


def handle(args: argparse.Namespace) -> int:
    suites = load_cases()
    rows = validate(suites, full=args.full)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "suite": row.suite,
                        "case": row.case,
                        "metric": row.metric,
                        "expected": row.expected,
                        "got": row.got,
                        "error": row.error,
                        "tolerance": row.tolerance,
                        "passed": row.passed,
                        **({"problem": row.problem} if row.problem else {}),
                    }
                    for row in rows
                ],
                indent=2,
            )
        )
    else:
        print(to_text(rows, suites))
    failed = [row for row in rows if not row.passed]
    if failed:
        print(
            f"error: {len(failed)} row{'s' * (len(failed) > 1)} failed: {'; '.join(row.label for row in failed)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0
