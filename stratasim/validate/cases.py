"""The cases ``stratasim validate`` checks, read from ``cases.yaml`` beside this module (shipped in the wheel with
the input files under ``data/``): each suite's rows, the figures each checks and how close they must come.

The tests that pin the same numbers read them from here, so a published figure is written down once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.compute_layer.measured.evaluation import MEDIAN_TARGET, WORST_TARGET, report_label
from stratasim.compute_layer.measured.profile_rows import ProfileRow, read_profile
from stratasim.compute_layer.measured.split import split_rows
from stratasim.kernel.errors import StrataSimError
from stratasim.kernel.safe_load import YAML_BYTES, parse_yaml, read_text
from stratasim.validate.formula import evaluate, variables

__all__ = ["HOME", "DATA", "KNOWN_MISS", "OPERATOR_TARGETS", "Check", "Case", "Suite", "load_cases", "case"]

HOME = Path(__file__).resolve().parent
"""Where ``cases.yaml`` lives."""

DATA = HOME / "data"
"""The input files the cases run (copies of the repository's examples and reference inputs)."""

KNOWN_MISS = "known miss, issue 26"
"""What an operator row of a kind that misses the target says beside its wider tolerance."""

OPERATOR_TARGETS = {"median_op_us": MEDIAN_TARGET, "worst_long_op_us": WORST_TARGET}
"""Each figure of an ``operator`` case and the target tolerance it is checked against
(:mod:`stratasim.validate.operator_rows`)."""

_KINDS = ("study", "astra", "closed_form", "scalesim", "operator")


@dataclass(frozen=True)
class Check:
    """One figure of one case: ``expected``, and either a relative ``tolerance`` (``|got / expected - 1| <=
    tolerance``; 0 is exact) or a ``band`` of ratios (``low <= got / expected <= high``); a ``note`` qualifies the
    tolerance (a known miss's)."""

    metric: str
    expected: float
    tolerance: float | None = None
    band: tuple[float, float] | None = None
    note: str = ""

    def passes(self, got: float) -> bool:
        """Whether ``got`` is close enough to ``expected``."""
        if self.band is not None:
            return self.band[0] <= got / self.expected <= self.band[1]
        assert self.tolerance is not None
        if self.tolerance == 0:
            return got == self.expected
        return abs(got / self.expected - 1) <= self.tolerance

    @property
    def allowed(self) -> str:
        """The tolerance as a reader says it: ``exact``, ``10 %`` or ``x0.7-0.85``, then the note in brackets."""
        if self.band is not None:
            allowed = f"x{self.band[0]:g}-{self.band[1]:g}"
        else:
            allowed = "exact" if self.tolerance == 0 else f"{100 * (self.tolerance or 0):g} %"
        return f"{allowed} ({self.note})" if self.note else allowed


@dataclass(frozen=True)
class Case:
    """One row group: a ``name``, what to run (``inputs``: the suite kind's keys) and its checks."""

    suite: str
    name: str
    inputs: Mapping[str, Any]
    checks: tuple[Check, ...]
    short: bool

    def check(self, metric: str) -> Check:
        """The check of ``metric``."""
        return next(check for check in self.checks if check.metric == metric)


@dataclass(frozen=True)
class Suite:
    """A suite of cases of one ``kind``, with a title and a note saying where its expected values come from."""

    name: str
    kind: str
    title: str
    note: str
    cases: tuple[Case, ...]


def _check(metric: str, spec: Any, where: str) -> Check:
    """The check of ``metric`` written as ``spec``."""
    if not isinstance(spec, dict) or not isinstance(spec.get("expected"), int | float):
        raise StrataSimError(f"{where}.{metric}: expected a mapping with a number `expected`")
    if spec["expected"] == 0 and spec.get("tolerance") != 0:
        raise StrataSimError(f"{where}.{metric}: an expected 0 can only be checked exactly (tolerance: 0)")
    if "band" in spec:
        band = spec["band"]
        if not (
            isinstance(band, list)
            and len(band) == 2
            and all(isinstance(x, int | float) for x in band)
            and 0 <= band[0] <= band[1]
        ):
            raise StrataSimError(f"{where}.{metric}.band: expected [LOW, HIGH], ratios with 0 <= LOW <= HIGH")
        return Check(metric, spec["expected"], band=(float(band[0]), float(band[1])))
    if not isinstance(spec.get("tolerance"), int | float) or spec["tolerance"] < 0:
        raise StrataSimError(f"{where}.{metric}: expected a `tolerance` from 0 or a `band`")
    return Check(metric, spec["expected"], tolerance=float(spec["tolerance"]))


def _checks(row: Mapping[str, Any], where: str) -> tuple[Check, ...]:
    """A row's checks: as written, or for a closed form its total time against the formula worked out."""
    if "formula" in row:
        names = variables(row["topology"], row["size"], row.get("endpoint_delay", "0ns"))
        return (Check("total_time_ps", evaluate(row["formula"], names, f"{where}.formula"), tolerance=0),)
    return tuple(_check(metric, check, f"{where}.checks") for metric, check in row["checks"].items())


def _scalesim_cases(name: str, spec: Mapping[str, Any]) -> tuple[Case, ...]:
    """One case per SCALE-Sim device and layer of the reference file the suite names."""
    reference = parse_yaml(read_text(DATA / spec["reference"], YAML_BYTES, "SCALE-Sim reference"), spec["reference"])
    cases = []
    for device, cycles in reference["scalesim"]["cycles"].items():
        for layer, expected in cycles.items():
            inputs = {"device": device, "layer": layer, **spec["layers"][layer]}
            check = Check("cycles", expected, tolerance=float(spec["tolerance"]))
            cases.append(Case(name, f"{device} {layer}", inputs, (check,), device in spec["short_devices"]))
    return tuple(cases)


def _tolerances(found: object, where: str) -> dict[str, float]:
    """A known miss's wider tolerance per metric, each a number above its target."""
    if not isinstance(found, dict) or not found or set(found) - set(OPERATOR_TARGETS):
        raise StrataSimError(f"{where}: expected a mapping of {' and/or '.join(OPERATOR_TARGETS)} to a tolerance")
    for metric, tolerance in found.items():
        if not isinstance(tolerance, int | float) or tolerance <= OPERATOR_TARGETS[metric]:
            raise StrataSimError(
                f"{where}.{metric}: expected a tolerance above the target {OPERATOR_TARGETS[metric]:g}"
            )
    return {metric: float(tolerance) for metric, tolerance in found.items()}


def _operator_cases(name: str, spec: Mapping[str, Any], where: str) -> tuple[Case, ...]:
    """One ``operator`` case per GPU and kind of the held-out rows of each profile the suite names (``profiles``:
    GPU to a copy under ``data/``), in file order, its checks made when it runs; ``short`` names the kinds the short
    form runs, ``known_misses`` (``"GPU kind"`` to a tolerance per figure) the wider tolerance of a kind that misses
    the target."""
    misses = dict(spec.get("known_misses") or {})
    cases = []
    for device, profile in spec["profiles"].items():
        grouped: dict[str, list[ProfileRow]] = {}
        for row in split_rows(read_profile(DATA / profile))[1]:
            grouped.setdefault(report_label(row), []).append(row)
        for kind, rows in grouped.items():
            label = f"{device} {kind}"
            wider = _tolerances(misses.pop(label), f"{where}.known_misses.{label}") if label in misses else {}
            inputs = {"device": device, "profile": profile, "rows": tuple(rows), "known_misses": wider}
            cases.append(Case(name, label, inputs, (), kind in spec["short"]))
    if misses:
        raise StrataSimError(f"{where}.known_misses: {', '.join(misses)} name no GPU and kind with held-out rows")
    return tuple(cases)


def load_cases(path: Path = HOME / "cases.yaml") -> tuple[Suite, ...]:
    """Every suite of ``path`` (by default the shipped ``cases.yaml``); raises :class:`StrataSimError` naming the
    dotted key of a malformed entry."""
    data = parse_yaml(read_text(path, YAML_BYTES, "validation cases"), str(path))
    suites = []
    for name, spec in data["suites"].items():
        where = f"{path}: suites.{name}"
        if spec.get("kind") not in _KINDS:
            raise StrataSimError(f"{where}.kind: expected one of {', '.join(_KINDS)}")
        if spec["kind"] == "scalesim":
            cases = _scalesim_cases(name, spec)
        elif spec["kind"] == "operator":
            cases = _operator_cases(name, spec, where)
        else:
            cases = tuple(
                Case(
                    name,
                    row["name"],
                    {key: value for key, value in row.items() if key not in ("name", "checks", "short")},
                    _checks(row, f"{where}.rows[{index}]"),
                    bool(row.get("short", False)),
                )
                for index, row in enumerate(spec["rows"])
            )
        suites.append(Suite(name, spec["kind"], spec["title"], " ".join(str(spec.get("note", "")).split()), cases))
    return tuple(suites)


def case(suite: str, name: str, suites: tuple[Suite, ...] | None = None) -> Case:
    """The case ``name`` of ``suite`` (what a test pinning the same numbers looks up)."""
    for found in suites or load_cases():
        if found.name == suite:
            return next(each for each in found.cases if each.name == name)
    raise KeyError(suite)
