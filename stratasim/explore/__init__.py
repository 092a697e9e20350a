"""Design-space exploration: sweep files, their named generators (every parallelism plan, topology shapes), the
trials they expand to, fidelity ladders, a results store that survives crashes, and reading it back
(:func:`read_results`); :func:`sweep` runs one from Python and reads it back."""

from stratasim.explore.notebook import sweep
from stratasim.explore.results import SweepResults, read_results
from stratasim.explore.run import SweepOutcome, run_sweep
from stratasim.explore.space import expand
from stratasim.explore.store import ResultStore
from stratasim.explore.sweep_file import Sweep, load_sweep

__all__ = [
    "Sweep",
    "load_sweep",
    "expand",
    "ResultStore",
    "run_sweep",
    "SweepOutcome",
    "read_results",
    "SweepResults",
    "sweep",
]
