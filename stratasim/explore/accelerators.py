"""``{generator: accelerator}``: accelerator configurations of the Timeloop-style model, as DEAP varies Gemmini's.

The base study describes its accelerator, from a preset (``compute.device: {preset: systolic-32x32-os, ...}``) or
whole (``name``, ``pe_rows``, ..., ``levels`` as a list), priced by the ``timeloop`` backend
(:mod:`stratasim.compute_layer.accelerator_section`), and each point sets keys of that description, for every
combination of

- a PE array shape, ``compute.device.pe_rows`` and ``pe_cols``: every ``rows x cols`` of the ``rows`` and ``cols``
  lists, or every factorisation of each PE count of ``pes`` (``1x1024`` to ``1024x1``: rows carry another problem
  dimension than columns, so ``32x64`` and ``64x32`` are distinct); neither keeps the base's array;
- a ``dataflow`` (``os``, ``ws``, ``is``) when listed;
- buffer sizes in words, ``buffers: {LEVEL: [...]}`` for a storage level's ``words`` (what it holds of every operand
  it keeps) and ``{LEVEL.OPERAND: [...]}`` for one operand's buffer (``levels.LEVEL.partitions.OPERAND``), LEVEL
  being one of the base accelerator's level names (a whole description's levels are a list, so its points set
  ``levels.I.words``, I the level's place in it).

An array longer than ``max_aspect`` times its width (either way) is skipped; so is every configuration the model
refuses (a systolic dataflow on Eyeriss's row-stationary array, say), by the model's own reason, each counted.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import ConfigDict, Field, StringConstraints, ValidationError, model_validator

from stratasim.compute_layer.accelerator_section import AcceleratorDescription, AcceleratorSection
from stratasim.compute_layer.timeloop.problem import OPERANDS
from stratasim.explore.generators import Generated, Generator, GeneratorError, Size, divisors, reason

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["AcceleratorGenerator", "array_shapes"]

_BACKEND = "timeloop"
_DEVICE = "compute.device."
Side = Annotated[int, Field(ge=1)]
BufferKey = Annotated[str, StringConstraints(pattern=r"^[^.\s]+(\.[^.\s]+)?$")]
Described: TypeAlias = AcceleratorSection | AcceleratorDescription


class AcceleratorGenerator(Generator):
    """``generator: accelerator`` and its options (the module docstring says what each varies)."""

    model_config = ConfigDict(title="generator: accelerator")

    generator: Literal["accelerator"]
    """accelerator: configurations of the base study's timeloop accelerator."""
    rows: list[Side] | None = Field(default=None, min_length=1)
    """PE array rows to try (with cols)."""
    cols: list[Side] | None = Field(default=None, min_length=1)
    """PE array columns to try (with rows)."""
    pes: list[Side] | None = Field(default=None, min_length=1)
    """PE counts, each tried in every rows x cols shape (instead of rows and cols)."""
    dataflow: list[Literal["os", "ws", "is"]] | None = Field(default=None, min_length=1)
    """Dataflows to try."""
    buffers: dict[BufferKey, Annotated[list[Side], Field(min_length=1)]] | None = Field(default=None, min_length=1)
    """Buffer sizes in words to try, by LEVEL (its words) or LEVEL.OPERAND (one operand's buffer)."""
    max_aspect: float | None = Field(default=None, ge=1)
    """Skip arrays longer than this many times their width."""

    @model_validator(mode="after")
    def _something_to_vary(self) -> AcceleratorGenerator:
        if self.pes is not None and (self.rows is not None or self.cols is not None):
            raise ValueError("give the PE array either as rows and cols lists or as pes (PE counts), not both")
        if (self.rows is None) != (self.cols is None):
            raise ValueError(f"rows and cols go together; {'cols' if self.cols is None else 'rows'} is missing")
        if self.rows is None and self.pes is None and self.dataflow is None and self.buffers is None:
            raise ValueError("nothing to vary: give rows and cols, pes, dataflow or buffers")
        return self

    def size(self, study: Study) -> Size:
        """The product of the axes' lengths: array shapes, dataflows, each buffer's sizes."""
        return Size(
            len(self._shapes())
            * len(self.dataflow or [None])
            * math.prod(len(sizes) for sizes in (self.buffers or {}).values())
        )

    def generate(self, study: Study) -> Generated:
        section, base = _base_device(study)
        axes = [
            self._shapes(),
            [{"dataflow": flow} for flow in self.dataflow or []] or [{}],
            *self._buffer_axes(section, base),
        ]
        points: list[dict[str, Any]] = []
        skipped: Counter[str] = Counter()
        for combination in itertools.product(*axes):
            keys = {key: value for part in combination for key, value in part.items()}
            rows, cols = keys.get("pe_rows"), keys.get("pe_cols")
            if rows and cols and self.max_aspect and max(rows, cols) > self.max_aspect * min(rows, cols):
                skipped[f"arrays longer than max_aspect ({self.max_aspect:g}) times their width"] += 1
                continue
            try:
                section.model_validate(_with(base, keys))
            except ValidationError as exc:
                skipped[reason(str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, "))] += 1
                continue
            points.append({_DEVICE + key: value for key, value in keys.items()})
        return Generated(points, skipped, noun="accelerators")

    def _shapes(self) -> list[dict[str, Any]]:
        """The PE array shapes as ``pe_rows`` and ``pe_cols``, each once ([{}]: the base's array)."""
        if self.pes is not None:
            shapes = [shape for pes in self.pes for shape in array_shapes(pes)]
        elif self.rows is not None and self.cols is not None:
            shapes = [(rows, cols) for rows in self.rows for cols in self.cols]
        else:
            return [{}]
        return [{"pe_rows": rows, "pe_cols": cols} for rows, cols in dict.fromkeys(shapes)]

    def _buffer_axes(self, section: type[Described], base: dict[str, Any]) -> list[list[dict[str, Any]]]:
        """One axis per ``buffers`` entry: the description's key it sets, over its sizes (a whole description's
        level by its place in the list)."""
        levels = [level.name for level in section.model_validate(base).accelerator().levels]
        axes = []
        for key, sizes in (self.buffers or {}).items():
            level, _, operand = key.partition(".")
            if level not in levels:
                raise GeneratorError(
                    f"buffers.{key}", f"the base accelerator has no level {level!r}; its levels are {', '.join(levels)}"
                )
            if operand and operand not in OPERANDS:
                raise GeneratorError(f"buffers.{key}", f"unknown operand {operand!r}; expected {', '.join(OPERANDS)}")
            place = levels.index(level) if section is AcceleratorDescription else level
            path = f"levels.{place}.partitions.{operand}" if operand else f"levels.{place}.words"
            axes.append([{path: size} for size in sizes])
        return axes


def _base_device(study: Study) -> tuple[type[Described], dict[str, Any]]:
    """The base study's accelerator description, its form and its keys as written; GeneratorError unless it
    describes one for timeloop."""
    if study.compute is None:
        raise GeneratorError("generator", f"needs a base study with a compute section (backend: {_BACKEND})")
    others = sorted(set(study.compute.routes().values()) - {_BACKEND})
    if others:
        raise GeneratorError(
            "generator",
            f"varies a {_BACKEND} accelerator, so every backend of the base study's "
            f"compute section must be {_BACKEND}, not {', '.join(others)}",
        )
    device = study.compute.device
    if not isinstance(device, (AcceleratorSection, AcceleratorDescription)):
        raise GeneratorError(
            "generator",
            f"varies the keys of compute.device: write the base study's device as a "
            f"mapping, {{preset: {device if isinstance(device, str) else 'NAME'}}}",
        )
    return type(device), device.model_dump(exclude_unset=True)


def _with(description: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    """``description`` with each dotted key of ``keys`` set (a number indexes a list), what is on the way copied."""
    result = dict(description)
    for dotted, value in keys.items():
        *path, last = dotted.split(".")
        node: Any = result
        for part in path:
            key: Any = int(part) if isinstance(node, list) else part
            child = node[key] if isinstance(node, list) else node.get(part)
            node[key] = copied = list(child) if isinstance(child, list) else dict(child or {})
            node = copied
        node[int(last) if isinstance(node, list) else last] = value
    return result


def array_shapes(pes: int) -> list[tuple[int, int]]:
    """Every ``(rows, cols)`` with ``rows * cols == pes``, rows ascending."""
    return [(rows, pes // rows) for rows in divisors(pes, None, "pes", "give PE counts with fewer divisors")]
