"""``{generator: accelerator}``: accelerator configurations for the Timeloop-style model, as DEAP varies Gemmini's.

Each point sets ``compute.device`` to a systolic array of the Timeloop-style model, ``systolic-<rows>x<cols>-<dataflow>``
(:func:`stratasim.compute_layer.timeloop.accelerator.systolic`: SCALE-Sim's example buffers, 64 kB each for inputs,
weights and outputs), for every combination of

- a PE array shape: every ``rows x cols`` of the ``rows`` and ``cols`` lists, or every factorisation ``rows x cols``
  of each PE count of ``pes`` (``1x1024`` to ``1024x1``: rows carry a different dimension than columns under each
  dataflow, so ``32x64`` and ``64x32`` are distinct);
- a ``dataflow`` (default every one the model has: output-, weight- and input-stationary).

An array longer than ``max_aspect`` times its width (either way) is skipped and counted. Each configuration is
built and validated by the model itself and named as the model names it. Buffer sizes are the preset's: a study cannot yet
describe a Timeloop-style accelerator's storage levels (only name one), so there is no key to vary them by.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from stratasim.compute_layer.timeloop.accelerator import DATAFLOWS, systolic
from stratasim.explore.generators import Generated, Generator, GeneratorError

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["AcceleratorGenerator", "array_shapes"]

_BACKEND = "timeloop"
Side = Annotated[int, Field(ge=1)]


class AcceleratorGenerator(Generator):
    """``generator: accelerator`` and its options (the module docstring says what each varies)."""

    generator: Literal["accelerator"]
    rows: list[Side] | None = Field(default=None, min_length=1)
    cols: list[Side] | None = Field(default=None, min_length=1)
    pes: list[Side] | None = Field(default=None, min_length=1)
    dataflow: list[Literal["os", "ws", "is"]] = Field(default=list(DATAFLOWS), min_length=1)
    max_aspect: float | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_way_to_shape(self) -> AcceleratorGenerator:
        grid = self.rows is not None or self.cols is not None
        if grid == (self.pes is not None):
            raise ValueError("give the PE array either as rows and cols lists or as pes (PE counts), one of the two")
        if grid and (self.rows is None or self.cols is None):
            raise ValueError(f"rows and cols go together; {'cols' if self.cols is None else 'rows'} is missing")
        return self

    def generate(self, study: Study) -> Generated:
        if study.compute is None:
            raise GeneratorError("generator", f"needs a base study with a compute section (backend: {_BACKEND})")
        others = sorted(set(study.compute.routes().values()) - {_BACKEND})
        if others:
            raise GeneratorError("generator", f"sets compute.device to a {_BACKEND} accelerator, so every backend of "
                                              f"the base study's compute section must be {_BACKEND}, not "
                                              f"{', '.join(others)}")  # fmt: skip
        points: list[dict[str, Any]] = []
        skipped: Counter[str] = Counter()
        for rows, cols in self._shapes():
            if self.max_aspect is not None and max(rows, cols) > self.max_aspect * min(rows, cols):
                skipped[f"arrays longer than max_aspect ({self.max_aspect:g}) times their width"] += len(self.dataflow)
                continue
            points += [{"compute.device": systolic(rows, cols, dataflow).name} for dataflow in self.dataflow]
        return Generated(points, skipped, noun="accelerators")

    def _shapes(self) -> list[tuple[int, int]]:
        """The PE array shapes, in the order given (each once)."""
        if self.pes is not None:
            shapes = [shape for pes in self.pes for shape in array_shapes(pes)]
        else:
            assert self.rows is not None and self.cols is not None  # validated: both or pes
            shapes = [(rows, cols) for rows in self.rows for cols in self.cols]
        return list(dict.fromkeys(shapes))


def array_shapes(pes: int) -> list[tuple[int, int]]:
    """Every ``(rows, cols)`` with ``rows * cols == pes``, rows ascending."""
    return [(rows, pes // rows) for rows in range(1, pes + 1) if pes % rows == 0]
