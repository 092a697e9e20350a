"""Building the compute backend a study's ``compute:`` section names: one backend, or one per operator kind.

Factories are called without arguments, except the ``profile`` backend's, which is handed the section's table
(``profile=FILE``); spawned servers get the same as ``--profile FILE``. With ``per_kind`` every distinct
backend named is opened once (in-process or spawned, as the section says) and wrapped in a
:class:`~stratasim.compute_layer.per_kind.PerKindCompute`.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack

from stratasim.compute_layer.sections import PROFILE_BACKEND
from stratasim.config.study_file import StudyCompute
from stratasim.kernel import registry
from stratasim.kernel.contracts import ComputeBackend

__all__ = ["build_compute", "open_compute", "serve_command"]


def build_compute(name: str, profile: str | None = None) -> ComputeBackend:
    """The registered compute backend ``name``, in-process; ``profile`` is the table a ``profile`` backend reads."""
    factory = registry.load("compute", name)
    backend: ComputeBackend = factory(profile=profile) if name == PROFILE_BACKEND else factory()
    return backend


def serve_command(name: str, profile: str | None) -> list[str]:
    """The command line of a local server for compute backend ``name`` on a free port."""
    argv = [sys.executable, "-m", "stratasim", "serve", "compute", "--backend", name, "--listen", "127.0.0.1:0"]
    return argv + (["--profile", profile] if name == PROFILE_BACKEND and profile is not None else [])


def _open_one(name: str, section: StudyCompute, stack: ExitStack) -> tuple[ComputeBackend, str]:
    if section.endpoint is None and not section.spawn:
        backend = build_compute(name, section.profile)
        stack.callback(backend.close)
        return backend, f"{name} (in-process)"
    from stratasim import remote  # gRPC is only needed for layers in other processes

    if section.endpoint is not None:
        endpoint = section.endpoint
    else:
        endpoint = stack.enter_context(remote.spawn("compute", name, command=serve_command(name, section.profile)))
    client = remote.ComputeClient(endpoint, backend=name)
    stack.callback(client.close)
    return client, f"{name} @ {endpoint}{' (spawned)' if section.spawn else ''}"


def open_compute(section: StudyCompute, stack: ExitStack) -> tuple[ComputeBackend, str]:
    """The backend ``section`` names and a label saying where it runs; closed (servers stopped) with ``stack``."""
    if section.per_kind is None:
        return _open_one(section.backend, section, stack)
    from stratasim.compute_layer.per_kind import PerKindCompute

    routes = section.routes()
    opened: dict[str, tuple[ComputeBackend, str]] = {}
    for name in dict.fromkeys(routes.values()):  # each distinct backend once, in a fixed order
        opened[name] = _open_one(name, section, stack)
    label = ", ".join(f"{kind}: {opened[name][1]}" for kind, name in sorted(routes.items()))
    return PerKindCompute({kind: opened[name][0] for kind, name in routes.items()}), f"per kind ({label})"
