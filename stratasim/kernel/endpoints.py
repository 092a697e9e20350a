"""Where a layer in another process listens: ``HOST:PORT``, or ``unix:PATH`` for a Unix-domain socket.

Read by the study file (``endpoint:``) and by ``stratasim serve --listen``; light on purpose, so that a server's
command line checks it without loading study files or the engine.
"""

from __future__ import annotations

import re

__all__ = ["check_endpoint"]

_ENDPOINT = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})$")
_UNIX_ENDPOINT = re.compile(r"^unix:\S+$")


def check_endpoint(text: str, *, allow_any_port: bool = False) -> str:
    """Return ``text`` if it reads as ``HOST:PORT`` or ``unix:PATH`` (a Unix-domain socket: a server on the same
    machine, at about half the latency per round trip of loopback TCP); port 0 (pick a free one) only with
    ``allow_any_port``. Raises ValueError saying what is expected otherwise."""
    stripped = text.strip()
    if _UNIX_ENDPOINT.match(stripped):
        return stripped
    match = _ENDPOINT.match(stripped)
    lowest = 0 if allow_any_port else 1
    if match is None or not lowest <= int(match[1]) <= 65535:
        raise ValueError(f"expected HOST:PORT such as 127.0.0.1:50051, or unix:PATH, got {text!r}")
    return stripped
