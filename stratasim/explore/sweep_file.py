"""A sweep file: a base study, the study keys to vary and over what, the objectives, the constraints, the search.

    base: quickstart.yaml                # a study file (relative to the sweep file), or an inline study: `study:`
    space:                               # dotted study keys, as --set names them
      system.splits: [1, 2, 4]           # a list: these values
      network.topology.0.bandwidth: {low: 25GB/s, high: 400GB/s, log: true, count: 4}   # a range
      plan: {generator: parallelism, tp: [1, 2, 4, 8]}     # a named generator (stratasim.explore.generators)
    objectives: [{metric: total_time_ns, goal: min}]
    constraints: [{metric: exposed_comm_ns, max: 1e6}]
    search: {method: grid}               # grid | random | tpe | nsga2 (with trials and seed)
    fidelity:                            # optional: screen cheaply, re-evaluate the best at a higher fidelity
      - {name: screen, set: {network.backend: analytical}, keep: {fraction: 0.25}}   # or top: N, or pareto: true
      - {name: detailed, set: {network.backend: congestion_aware}}
    # or a first level that estimates instead of simulating (stratasim.explore.screening):
    #   - {name: screen, estimate: first_order, keep: {top: 10}}

A range's bounds are numbers or quantities with a unit (``25GB/s``), both with the same unit; its values are
written back with that unit for the study's schema to read. Every problem is reported at once, by dotted path.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from stratasim.config.numbers import unfit_numbers
from stratasim.config.overrides import parse_key
from stratasim.config.problems import validated_section
from stratasim.config.study_file import STUDY_SECTIONS
from stratasim.explore.accelerators import AcceleratorGenerator
from stratasim.explore.generators import Generator
from stratasim.explore.plans import ParallelismGenerator
from stratasim.explore.shapes import TopologyGenerator
from stratasim.kernel.errors import ConfigError, InputError
from stratasim.kernel.safe_load import YAML_BYTES, parse_yaml, read_text
from stratasim.kernel.schema import Section

__all__ = [
    "GENERATORS",
    "Range",
    "Objective",
    "Constraint",
    "Search",
    "Fidelity",
    "Keep",
    "Sweep",
    "load_sweep",
    "parse_sweep",
    "split_quantity",
]

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*)?$")


def split_quantity(value: object) -> tuple[float, str]:
    """``25GB/s`` as ``(25.0, "GB/s")``, a bare number as ``(number, "")``; ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number or a quantity such as 25GB/s, got {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, int) and abs(value) > sys.float_info.max:
            raise ValueError(f"expected a number or a quantity, got a whole number of {value.bit_length()} bits")
        return float(value), ""
    match = _QUANTITY.match(str(value))
    if match is None:
        raise ValueError(f"expected a number or a quantity such as 25GB/s, got {value!r}")
    return float(match[1]), (match[2] or "").strip()


class Range(Section):
    """Values between ``low`` and ``high`` (inclusive; log-spaced with ``log``); a grid takes ``count`` of them,
    evenly spaced, a random search draws them. Whole numbers without a unit give integers."""

    model_config = ConfigDict(title="a range")

    low: int | float | str
    """The lowest value: a number, or a quantity with its unit (25GB/s)."""
    high: int | float | str
    """The highest value, in the unit of low."""
    log: bool = False
    """Space the values evenly on a log scale (both bounds positive)."""
    count: int | None = Field(default=None, ge=2)
    """How many values a grid takes, evenly spaced and bounds included (a grid needs it)."""

    @model_validator(mode="after")
    def _bounds(self) -> Range:
        low, unit = split_quantity(self.low)
        high, high_unit = split_quantity(self.high)
        if unit != high_unit:
            raise ValueError(
                f"low and high must have the same unit, got {unit or 'none'!r} and {high_unit or 'none'!r}"
            )
        if low > high:
            raise ValueError(f"low ({self.low}) is above high ({self.high})")
        if self.log and low <= 0:
            raise ValueError("a log range needs positive bounds")
        return self

    @property
    def integer(self) -> bool:
        """Whether the range holds whole numbers: both bounds are integers written without a unit."""
        return all(isinstance(bound, int) and not isinstance(bound, bool) for bound in (self.low, self.high))

    def bounds(self) -> tuple[float, float, str]:
        """Low, high and the unit they share."""
        low, unit = split_quantity(self.low)
        return low, split_quantity(self.high)[0], unit


GENERATORS: dict[str, type[Generator]] = {
    "parallelism": ParallelismGenerator,
    "topology": TopologyGenerator,
    "accelerator": AcceleratorGenerator,
}
"""The named generators a space entry may use, by name."""


def _entry_form(value: Any) -> str | None:
    """The kind of a space entry (written, or validated when serialised): a list of values, a range, or a
    generator by its name (None: none of them)."""
    if isinstance(value, list):
        return "values"
    if isinstance(value, Range):
        return "range"
    if isinstance(value, Generator):
        return value.generator
    if not isinstance(value, Mapping):
        return None
    if "generator" not in value:
        return "range"
    name = value["generator"]
    return name if isinstance(name, str) and name in GENERATORS else None


if TYPE_CHECKING:
    SpaceEntry = list[Any] | Range | Generator
else:
    SpaceEntry = Annotated[
        Union[
            (
                Annotated[list[Any], Tag("values")],
                Annotated[Range, Tag("range")],
                *(Annotated[generator, Tag(name)] for name, generator in GENERATORS.items()),
            )
        ],
        Discriminator(
            _entry_form,
            custom_error_type="space_entry",
            custom_error_message="expected a list of values, a range {low, high, ...} or a generator "
            "{generator: NAME, ...} with NAME one of " + ", ".join(GENERATORS),
        ),
    ]
"""A ``space`` entry: the tag pydantic puts in error locations ("values", "range", a generator's name) is not a
key."""


class Objective(Section):
    """A report metric (a numeric field of ``report.json``, dotted for nested ones) to minimise or maximise."""

    metric: str
    """A numeric report field (report.json), dotted for a nested one: total_time_ns, serving.ttft_p99_ps."""
    goal: Literal["min", "max"] = "min"
    """Minimise or maximise it."""


class Constraint(Section):
    """A report metric a trial must keep within ``min`` and/or ``max`` to count (it is still stored)."""

    metric: str
    """A numeric report field, as objectives name them."""
    min: float | None = None
    """The least value a trial may have to count."""
    max: float | None = None
    """The most value a trial may have to count."""

    @model_validator(mode="after")
    def _some_bound(self) -> Constraint:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        return self


class Search(Section):
    """How trials are chosen: every combination (``grid``, at most ``trials`` of them if given), ``trials``
    points drawn at random with ``seed`` (the same seed, the same trials), or ``trials`` chosen one after the
    other by Optuna's TPE or NSGA-II sampler, seeded (:mod:`stratasim.explore.model_search`)."""

    method: Literal["grid", "random", "tpe", "nsga2", "milp"] = "grid"
    """grid: every combination; random: trials points drawn with seed; tpe, nsga2: Optuna's samplers; milp: the
    optimal plan of a parallelism generator's space by a mixed-integer program, then simulated (one trial)."""
    trials: int | None = Field(default=None, ge=1)
    """How many trials (a grid's cap; needed by the other methods)."""
    seed: int = 0
    """The seed of a random or model-based search: the same seed, the same trials."""

    @model_validator(mode="after")
    def _random_needs_trials(self) -> Search:
        if self.method not in ("grid", "milp") and self.trials is None:
            raise ValueError(f"a {self.method} search needs trials: how many points to try")
        return self


class Keep(Section):
    """Which trials of a fidelity level the next level evaluates again: the ``top`` N or the best ``fraction``
    (at least one) by the first objective, or the ``pareto`` front over all objectives; only feasible trials."""

    top: int | None = Field(default=None, ge=1)
    """Keep the best N by the first objective."""
    fraction: float | None = Field(default=None, gt=0, le=1)
    """Keep this fraction (at least one) of the trials, best by the first objective."""
    pareto: bool = False
    """Keep the Pareto front over every objective."""

    @model_validator(mode="after")
    def _one_rule(self) -> Keep:
        if sum((self.top is not None, self.fraction is not None, self.pareto)) != 1:
            raise ValueError("give one of top: N, fraction: F or pareto: true")
        return self


class Fidelity(Section):
    """One level of a multi-fidelity ladder: its ``name``, the study keys it sets on top of each trial's values
    (``set``, dotted as in ``space``: a network backend, a compute model) or, on the first level, the closed-form
    model that prices its trials instead of simulating them (``estimate``), and which of its trials go on to the
    next level (``keep``; the last level keeps none)."""

    name: str
    """The level's name, as the output says it."""
    set: dict[str, Any] = Field(default_factory=dict)
    """Study keys the level sets on top of each trial's values, dotted as in space."""
    estimate: Literal["first_order"] | None = None
    """First level only, without set: price its trials with the first-order model of a transformer training plan
    in one vectorised call instead of simulating them (a plan it declines is simulated)."""
    keep: Keep | None = None
    """Which trials go on to the next level (none on the last)."""

    @field_validator("set")
    @classmethod
    def _keys(cls, values: dict[str, Any]) -> dict[str, Any]:
        for key in values:
            try:
                parse_key(key)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return values


class SweepSection(Section):
    """The sweep file's keys (see the module docstring)."""

    base: str | None = None
    """The base study's file, relative to the sweep file."""
    study: dict[str, Any] | None = None
    """The base study inline, instead of base."""
    space: dict[str, SpaceEntry]
    """What to vary: a dotted study key to a list of values or a range, or a label to a generator."""
    objectives: list[Objective] = Field(default_factory=lambda: [Objective(metric="total_time_ns")])
    """The report metrics to minimise or maximise; several give a Pareto front."""
    constraints: list[Constraint] = Field(default_factory=list)
    """Report metrics a trial must keep within bounds to count (it is still stored)."""
    search: Search = Field(default_factory=Search)
    """How trials are chosen."""
    fidelity: list[Fidelity] = Field(default_factory=list)
    """A ladder: screen at a low fidelity, re-evaluate the kept trials at the next level."""

    @field_validator("space")
    @classmethod
    def _space(cls, space: dict[str, SpaceEntry]) -> dict[str, SpaceEntry]:
        if not space:
            raise ValueError("an empty space: name at least one study key to vary")
        for key, values in space.items():
            if isinstance(values, Generator):  # its name is a label, not a study key
                continue
            try:
                parse_key(key)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
            if isinstance(values, list) and not values:
                raise ValueError(f"{key}: an empty list of values")
        return space

    @model_validator(mode="after")
    def _one_base(self) -> SweepSection:
        if (self.base is None) == (self.study is None):
            raise ValueError("give the base study as a file (base: FILE) or inline (study: {...}), one of them")
        if any(isinstance(values, Range) and values.count is None for values in self.space.values()) and (
            self.search.method == "grid"
        ):
            raise ValueError("a grid over a range needs its count: how many values to take")
        return self


def _ladder_problems(section: SweepSection) -> list[tuple[str, str]]:
    """What is wrong with the fidelity ladder, by dotted path (nothing without one)."""
    levels = section.fidelity
    if not levels:
        return []
    if len(levels) < 2:
        return [("fidelity", "a ladder has at least two levels (screen, then re-evaluate)")]
    problems = []
    if section.search.method not in ("grid", "random"):
        problems.append(("fidelity", f"a ladder screens a grid or random search, not {section.search.method}"))
    for index, level in enumerate(levels):
        if level.keep is None and index < len(levels) - 1:
            problems.append(
                (
                    f"fidelity[{index}].keep",
                    "every level but the last says which trials go on (top: N, fraction: F or pareto: true)",
                )
            )
        elif level.keep is not None and index == len(levels) - 1:
            problems.append((f"fidelity[{index}].keep", "the last level keeps nothing: there is no level after it"))
        varied = sorted(set(level.set) & set(section.space))
        if varied:
            problems.append(
                (f"fidelity[{index}].set", f"{', '.join(varied)} is varied by the space; a level may not set it")
            )
        problems += _estimate_problems(index, level)
    names = [level.name for level in levels]
    if len(set(names)) < len(names):
        problems.append(("fidelity", f"level names must differ, got {', '.join(names)}"))
    return problems


def _estimate_problems(index: int, level: Fidelity) -> list[tuple[str, str]]:
    """What is wrong with a level's ``estimate`` (nothing without one): the first level only, without ``set``."""
    if level.estimate is None:
        return []
    if index:
        return [(f"fidelity[{index}].estimate", "only the first level estimates; the levels after it simulate")]
    if level.set:
        return [
            (
                f"fidelity[{index}].estimate",
                "a level that estimates sets no study keys: give estimate or set, not both (the first-order model "
                "prices the study as it is)",
            )
        ]
    return []


MILP_OBJECTIVES = {
    ("total_time_ns", "min"): "time",
    ("iteration_time_ns", "min"): "time",
    ("cost.perf_per_dollar", "max"): "perf_per_dollar",
    ("cost.perf_per_watt", "max"): "perf_per_watt",
}
"""The objectives a ``milp`` search optimises, by (metric, goal), and the optimiser's name for each."""


def _milp_problems(section: SweepSection) -> list[tuple[str, str]]:
    """What stops a ``milp`` search (nothing for the other methods): its space must be one parallelism generator,
    its objective one of :data:`MILP_OBJECTIVES`, and it has no fidelity ladder."""
    if section.search.method != "milp":
        return []
    problems = []
    entries = list(section.space.values())
    if len(entries) != 1 or not isinstance(entries[0], ParallelismGenerator):
        problems.append(
            (
                "space",
                "a milp search solves for one parallelism generator's plan: give space one {generator: parallelism} "
                "entry and nothing else (set other keys in the base study)",
            )
        )
    goals = [(objective.metric, objective.goal) for objective in section.objectives]
    if len(goals) != 1 or goals[0] not in MILP_OBJECTIVES:
        said = ", ".join(f"{metric} {goal}" for metric, goal in MILP_OBJECTIVES)
        problems.append(("objectives", f"a milp search optimises one objective: {said}; got {goals}"))
    if section.fidelity:
        problems.append(("fidelity", "a milp search runs one trial, the optimal plan: it has no fidelity ladder"))
    return problems


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: where it came from, the base study's raw mapping and its source, and the sections."""

    source: str
    base: Mapping[str, Any]
    base_source: str
    section: SweepSection


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file; one :class:`ConfigError` lists every problem by dotted path."""
    path = Path(path)
    return parse_sweep(_read(path, str(path), ""), str(path), path.parent)


def parse_sweep(data: Any, source: str, folder: Path) -> Sweep:
    """Validate a sweep's contents (``source`` names it in errors; ``base`` is relative to ``folder``); one
    :class:`ConfigError` lists every problem by dotted path."""
    if not isinstance(data, Mapping):
        raise ConfigError(source, [("", "expected a mapping with base (or study), space, objectives, search")])
    problems = unfit_numbers(data)
    if problems:  # no key reads a number that fits nothing
        raise ConfigError(source, problems)
    section = validated_section(SweepSection, data, "", problems)
    if section is not None:
        problems += _ladder_problems(section) + _milp_problems(section)
    if problems or section is None:
        raise ConfigError(source, problems)
    if section.study is not None:
        return Sweep(source, section.study, source, section)
    base_path = folder / str(section.base)
    base = _read(base_path, source, "base")
    if not isinstance(base, Mapping) or not set(map(str, base)) <= set(STUDY_SECTIONS):
        raise ConfigError(
            source,
            [
                (
                    "base",
                    f"{base_path} is not a study: a mapping of {', '.join(STUDY_SECTIONS)} (its contents are not shown)",
                )
            ],
        )  # a file named by mistake (a credentials file) is said by its shape, never echoed: it is also stored
    return Sweep(source, base, str(base_path), section)


def _read(path: Path, source: str, key: str) -> Any:
    """The YAML in ``path``; a problem of ``source`` at ``key`` if it cannot be read or parsed."""
    try:
        return parse_yaml(read_text(path, YAML_BYTES, "file"), str(path))
    except InputError as exc:
        at = f" ({exc.where})" if exc.where else ""
        said = (
            f"{path} is not valid YAML{at}: {exc.what.removeprefix('invalid YAML: ')}"
            if "YAML" in exc.what
            else f"cannot read {path}{at}: {exc.what}"
        )
        raise ConfigError(source, [(key, said)]) from None
