"""Running one study: building the workload and backends it names, simulating, and checking what came out.

The names are imported when first used, so that importing one module of this package (the command line's
:mod:`stratasim.study.limits`) does not import the whole runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from stratasim.study.run import check_study, run_study

__all__ = ["check_study", "run_study"]


__getattr__ = lazy_exports(__name__, {name: "run" for name in __all__})
