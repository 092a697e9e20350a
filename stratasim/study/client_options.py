"""What a client of a layer's server takes from the study: its deadlines, and for a server at an endpoint its TLS
root certificate and bearer token (read when the run opens the layer, so a secret is held no longer than needed).
"""

from __future__ import annotations

from typing import Any

from stratasim.config.placement import Placement

__all__ = ["client_options"]

_PS_PER_S = 1e12


def client_options(section: Placement, layer: str, spawned_token: str | None = None) -> dict[str, Any]:
    """The keyword arguments of the ``layer`` client (:class:`~stratasim.remote.NetworkClient`,
    :class:`~stratasim.remote.ComputeClient`) that ``section`` sets, with ``spawned_token`` the token of a server
    the run spawned; an unreadable file or unset variable raises RemoteError naming its key."""
    from stratasim.remote.security import ClientSecurity, read_pem, token_from

    options: dict[str, Any] = {}
    if section.timeout is not None:
        options["timeout_s"] = section.timeout / _PS_PER_S
    if section.connect_timeout is not None:
        options["connect_timeout_s"] = section.connect_timeout / _PS_PER_S
    if section.endpoint is not None and (section.tls_ca or section.token_file or section.token_env):
        token = token_from(
            section.token_file, section.token_env, what_file=f"{layer}.token_file", what_env=f"{layer}.token_env"
        )
        root = None if section.tls_ca is None else read_pem(section.tls_ca, f"{layer}.tls_ca")
        options["security"] = ClientSecurity(root_certificate=root, token=token)
    elif spawned_token is not None:
        options["security"] = ClientSecurity(token=spawned_token)
    return options
