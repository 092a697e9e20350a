"""Opening the backend a study section names: in-process from the registry, in a server spawned for the run, or at a
remote endpoint; closed (and a spawned server stopped) when the run's stack unwinds."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from stratasim.config.study_file import StudyCompute, StudyNetwork
from stratasim.kernel import registry
from stratasim.study.client_options import client_options
from stratasim.study.compute_setup import open_compute

if TYPE_CHECKING:
    from stratasim.remote import Spawned

__all__ = ["open_backend"]


def open_backend(
    layer: str,
    section: StudyNetwork | StudyCompute,
    stack: ExitStack,
    started: Mapping[tuple[str, str], Spawned],
) -> tuple[Any, str]:
    """The backend ``section`` names, closed (and its spawned server stopped) when ``stack`` unwinds; ``started``
    holds the servers the run started (:func:`~stratasim.study.run.run_study`)."""
    if isinstance(section, StudyCompute):
        return open_compute(
            section, stack, {name: server for (kind, name), server in started.items() if kind == "compute"}
        )
    name = section.backend_name
    if section.endpoint is None and not section.spawn:
        backend = registry.load(layer, name)()
        stack.callback(backend.close)
        return backend, f"{name} (in-process)"
    from stratasim import remote  # gRPC is only needed for layers in other processes

    connect = remote.open_network  # imports gRPC while a spawned server is still starting, not after
    spawned = started.get((layer, name))
    token = None if section.endpoint else spawned.token if spawned else remote.new_token()
    endpoint = section.endpoint or (
        spawned.endpoint() if spawned else stack.enter_context(remote.spawn(layer, name, token=token))
    )
    client = connect(endpoint, backend=name, **client_options(section, layer, token))
    stack.callback(client.close)
    return client, f"{name} @ {endpoint}{' (spawned)' if section.spawn else ''}"
