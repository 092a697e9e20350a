"""Helpers of the wire tests: commands for child-process servers, free ports, stub gRPC servers."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc

_ROOT = Path(__file__).resolve().parents[2]


def serve_command(layer: str, backend: str, prelude: str = "") -> list[str]:
    """A child-process command serving a fake backend (``prelude``: Python run first, ending in ``;``)."""
    code = (
        f"import sys; sys.path.insert(0, {str(_ROOT)!r}); {prelude}"
        "from tests.contracts.contract_fakes import factories; from stratasim.remote import serve; "
        f"serve({layer!r}, {backend!r}, '127.0.0.1:0', factories=factories({layer!r}))"
    )
    return [sys.executable, "-c", code]


@contextmanager
def refused_endpoint() -> Iterator[str]:
    """A loopback endpoint nothing listens on, for the block: its port stays bound (never listening), so a
    connection is refused and no other test running beside this one can take the port meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def stub_server(add: Callable[[grpc.Server], None]) -> Iterator[str]:
    """A bare gRPC server with whatever servicer ``add`` registers; yields its endpoint."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)
