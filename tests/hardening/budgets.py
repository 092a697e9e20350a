"""The two fuzzing budgets every fuzz test runs under: CI's short, derandomized one, and the long one that runs only
with ``pytest -m fuzz`` (its size from ``$STRATASIM_FUZZ_EXAMPLES``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from hypothesis import HealthCheck, settings

_SLOW = (HealthCheck.too_slow, HealthCheck.filter_too_much)


def ci_budget(examples: int, also: Sequence[HealthCheck] = ()) -> settings:
    """CI's budget: ``examples`` inputs, the same ones every run; slow inputs and rejected draws allowed, and the
    health checks in ``also``."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[*_SLOW, *also],
    )


def long_budget(examples: int = 10_000, also: Sequence[HealthCheck] = ()) -> settings:
    """The long budget: ``examples`` inputs (or ``$STRATASIM_FUZZ_EXAMPLES``), drawn afresh each run."""
    count = int(os.environ.get("STRATASIM_FUZZ_EXAMPLES", str(examples)))
    return settings(max_examples=count, deadline=None, database=None, suppress_health_check=[*_SLOW, *also])
