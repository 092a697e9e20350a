"""StrataSim: layered, multi-fidelity co-simulation of distributed deep-learning systems.

This package holds the kernel every layer stands on (:mod:`stratasim.kernel`), the generated wire modules
(:mod:`stratasim.v1`, :mod:`stratasim.chakra`) and the composition root that wires the layers: the study file
(:mod:`stratasim.config`), running it (:mod:`stratasim.study`), its report (:mod:`stratasim.report`), the command
line (:mod:`stratasim.cli`), benchmarks, importers and remote layers. The layers install beside them as
``stratasim.workload_layer``, ``stratasim.system_layer``, ``stratasim.network_layer``, ``stratasim.compute_layer``
and ``stratasim.adapters``. ``stratasim.run(study, **overrides)`` is the one call a notebook needs
(``docs/reference/python-api.md``).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing takes tens of milliseconds at start-up, when Ctrl-C would
if TYPE_CHECKING:  # interrupt it with a traceback before the command line can catch it
    from typing import Any

# Run from a source checkout (the repository's root on sys.path, as ``python`` started there puts it), this folder
# is ``stratasim`` but the layers are its siblings, which an install maps to ``stratasim.<layer>``: look for them
# there too. An installed package has no such siblings and is left as it is.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, "system_layer", "__init__.py")):
    __path__.append(_CHECKOUT)

__version__ = "0.1.0"
__all__ = ["run", "load_study", "Report", "Study"]

_EXPORTS = {
    "run": "stratasim.study.entry",
    "load_study": "stratasim.config.study_file",
    "Study": "stratasim.config.study_file",
    "Report": "stratasim.report.report",
}


def __getattr__(name: str) -> Any:
    """The notebook API (``stratasim.run``, ``load_study``, ``Study``, ``Report``), imported when first asked for:
    ``import stratasim`` alone stays as light as a spawned server needs it."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'stratasim' has no attribute {name!r}")
