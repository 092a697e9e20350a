"""Backends chosen by name: entry-point groups ``stratasim.network``, ``stratasim.compute``, ``stratasim.workload``.

A package adds a backend by declaring an entry point in one of these groups; nothing in StrataSim lists them.
Tests and embedders may also pass extra ``{name: factory}`` pairs, which take precedence over entry points.

A factory takes its validated section: a workload's, its kind's ``Config``; a compute backend's, the keys of the
study's ``compute:`` it is built with (``stratasim.compute_layer.backend_section.BackendSection``; no argument: its
defaults); a network backend's, nothing (its keys reach it in the topology ``configure`` hands it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from stratasim.kernel.errors import BackendError

__all__ = ["LAYERS", "available", "load"]

LAYERS = ("network", "compute", "workload")


def _group(layer: str) -> str:
    if layer not in LAYERS:
        raise BackendError(f"unknown layer {layer!r}; expected one of {', '.join(LAYERS)}")
    return f"stratasim.{layer}"


@cache
def _registered(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``, read once per process: reading them scans every installed distribution
    (milliseconds each time), and what is installed does not change while a run lasts. A server forked from a
    run inherits what the run read (a study's backends are checked by name when it is loaded)."""
    return tuple(entry_points(group=group))


def available(layer: str, extra: Mapping[str, Callable[..., Any]] | None = None) -> list[str]:
    """Names of every backend registered for ``layer``, sorted."""
    names = {ep.name for ep in _registered(_group(layer))}
    return sorted(names | set(extra or {}))


def load(layer: str, name: str, extra: Mapping[str, Callable[..., Any]] | None = None) -> Callable[..., Any]:
    """The factory (usually a class) registered for ``layer`` under ``name``."""
    group = _group(layer)
    if extra and name in extra:
        return extra[name]
    matches = [ep for ep in _registered(group) if ep.name == name]
    if not matches:
        known = ", ".join(available(layer, extra)) or "none"
        raise BackendError(f"no {layer} backend named {name!r}; available: {known}")
    try:
        factory: Callable[..., Any] = matches[0].load()
    except ImportError as exc:
        raise BackendError(
            f"{layer} backend {name!r} cannot be imported ({exc}); install the extra that provides it"
        ) from exc
    return factory
