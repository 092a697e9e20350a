"""Typed errors of StrataSim; the CLI turns each into one clear message and a non-zero exit."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "did_you_mean",
    "StrataSimError",
    "ConfigError",
    "InputError",
    "UnitError",
    "WorkloadError",
    "TopologyError",
    "BackendError",
    "RemoteError",
    "SimulationError",
]


class StrataSimError(Exception):
    """Base of every error StrataSim raises on purpose; ``str(err)`` is the message a user sees."""


class ConfigError(StrataSimError):
    """A study file or override is malformed; ``problems`` lists every finding as ``(dotted.path, message)``."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem{'s' if len(problems) != 1 else ''}"]
        lines += [f"  {path or '<top>'}: {message}" for path, message in problems]
        super().__init__("\n".join(lines))


class InputError(StrataSimError):
    """A file could not be read or parsed (too big, binary, not UTF-8, malformed, nested too deep, an alias bomb);
    ``source`` is the file, ``where`` its line and column when known, ``what`` the defect."""

    def __init__(self, source: str, where: str, what: str) -> None:
        self.source, self.where, self.what = source, where, what
        super().__init__(f"{source}: {f'{where}: ' if where else ''}{what}")


class UnitError(StrataSimError, ValueError):
    """A quantity such as ``50GB/s`` or ``500ns`` could not be read."""


class WorkloadError(StrataSimError):
    """A workload is inconsistent with itself or with the topology it runs on."""


class TopologyError(StrataSimError):
    """A topology description is invalid (zero bandwidth, empty dimension, unknown kind...)."""


class BackendError(StrataSimError):
    """A backend is unknown, cannot be loaded, or rejected a request."""


class RemoteError(StrataSimError):
    """A layer running in another process is unreachable, incompatible, or died."""


class SimulationError(StrataSimError):
    """The simulation reached an impossible state (e.g. a deadlock: work left but no event pending)."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` naming the choice closest to a misspelt ``name``, or ``""`` when none is close: the one
    way messages suggest a key, a preset or any other name the user meant."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean {close[0]!r}? " if close else ""
