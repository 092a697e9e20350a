"""The servers a study spawns for its layers: started all at once before its workload is built, stopped when the
run's exit stack unwinds."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

from stratasim.config.study_file import Study
from stratasim.study.compute_setup import backend_names

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection
    from stratasim.remote import Spawned

__all__ = ["start_servers"]


def start_servers(study: Study, stack: ExitStack) -> dict[tuple[str, str], Spawned]:
    """Start every server the study spawns, all at once and before its workload is built, so that their start-up
    overlaps building it: the endpoint of each (waited for when called) by layer and backend. A spawned network
    and the (first) spawned compute backend share one server: one interpreter and one import of gRPC to wait for,
    not two competing for the cores. Each asks its clients for a random token. They are stopped when ``stack``
    unwinds."""
    wanted: list[tuple[str, str, BackendSection | None]] = []
    if study.network.spawn:
        wanted.append(("network", study.network.backend_name, None))
    if study.compute is not None and study.compute.spawn:
        section = study.compute
        wanted += [("compute", name, section.backend_section()) for name in backend_names(section)]
    if not wanted:
        return {}
    from stratasim import remote  # starting servers imports no gRPC: they boot while the engine imports it

    servers: dict[tuple[str, str], Spawned] = {}
    if len(wanted) > 1 and wanted[0][0] == "network":  # the network and the first compute backend: one server
        (_, network, _), (_, compute, compute_section) = wanted[:2]
        both = stack.enter_context(
            remote.start(
                "network", network, section=compute_section, also=("compute", compute), token=remote.new_token()
            )
        )
        servers = {("network", network): both, ("compute", compute): both}
        wanted = wanted[2:]
    for layer, name, backend_section in wanted:
        servers[layer, name] = stack.enter_context(
            remote.start(layer, name, section=backend_section, token=remote.new_token())
        )
    # All asked to stop at once, then each start() waits for its own.
    stack.callback(terminate_all, list({id(server): server for server in servers.values()}.values()))
    return servers


def terminate_all(servers: list[Spawned]) -> None:
    """Ask every spawned server to stop, without waiting for any."""
    for server in servers:
        server.terminate()
