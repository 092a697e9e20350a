"""Who may talk to a server: optional TLS (a certificate and key; a client CA for mutual TLS) and a bearer token
checked on every call, and the warning a server listening beyond loopback without both prints.

The token never travels on a command line (``ps`` shows it to every user): a server reads it from a file
(``--token-file``) or from the environment variable :data:`TOKEN_ENV`; a client from the study's ``token_file`` or
``token_env``. It is sent as ``authorization: Bearer TOKEN`` metadata and compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import grpc

from stratasim.kernel.errors import RemoteError
from stratasim.remote.serve_options import TOKEN_ENV

__all__ = [
    "TOKEN_ENV",
    "ClientSecurity",
    "ServerSecurity",
    "exposure_warning",
    "read_pem",
    "read_secret",
    "token_from",
    "warn_if_exposed",
]

_HEADER = "authorization"
_SCHEME = "Bearer "
_LOOPBACK_NAMES = ("localhost",)


def read_secret(path: str, what: str) -> bytes:
    """The bytes of ``path``, or a RemoteError naming ``what`` (an option or study key) and why it is unreadable."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RemoteError(f"{what}: cannot read {path!r}: {exc.strerror or exc}") from None
    if not data.strip():
        raise RemoteError(f"{what}: {path!r} is empty")
    return data


def read_pem(path: str, what: str, *, key: bool = False) -> bytes:
    """The PEM certificate(s) (or, ``key``, private key) in ``path``; a RemoteError naming ``what`` if it holds none."""
    data = read_secret(path, what)
    marker = b"PRIVATE KEY-----" if key else b"-----BEGIN CERTIFICATE-----"
    if marker not in data:
        raise RemoteError(
            f"{what}: {path!r} holds no PEM {'private key' if key else 'certificate'} "
            f"(expected a block starting {marker.decode().strip('-') if key else marker.decode()})"
        )
    return data


def _token_text(data: bytes, what: str) -> str:
    """A token read from a file or the environment: one line of printable ASCII, without surrounding blanks."""
    token = data.decode("ascii", errors="replace").strip()
    if not token or not token.isprintable() or not token.isascii() or "\ufffd" in token:
        raise RemoteError(f"{what}: expected one line of printable ASCII (the bearer token)")
    return token


def token_from(file: str | None, env: str | None, *, what_file: str, what_env: str) -> str | None:
    """The token from ``file`` (first) or the environment variable ``env``; None when neither is given."""
    if file is not None:
        return _token_text(read_secret(file, what_file), what_file)
    if env is None:
        return None
    value = os.environ.get(env)
    if value is None:
        raise RemoteError(f"{what_env}: the environment variable {env} is not set")
    return _token_text(value.encode(errors="replace"), f"{what_env} ({env})")


@dataclass(frozen=True)
class ServerSecurity:
    """A server's TLS material (PEM bytes; ``client_ca`` asks clients for a certificate it signed) and token."""

    token: str | None = None
    certificate: bytes | None = None
    private_key: bytes | None = None
    client_ca: bytes | None = None

    @property
    def tls(self) -> bool:
        """Whether the server speaks TLS."""
        return self.certificate is not None

    def credentials(self) -> grpc.ServerCredentials:
        """The server's TLS credentials; only when :attr:`tls`."""
        assert self.certificate is not None and self.private_key is not None
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )

    def interceptors(self) -> list[grpc.ServerInterceptor]:
        """The token check on every call, when there is a token."""
        return [] if self.token is None else [_TokenCheck(self.token)]


class _TokenCheck(grpc.ServerInterceptor):
    """Refuses every call whose ``authorization`` metadata is not ``Bearer <the token>`` (UNAUTHENTICATED)."""

    def __init__(self, token: str) -> None:
        self._expected = (_SCHEME + token).encode()

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        """Pass the call on if its token matches; else answer it with UNAUTHENTICATED, running nothing."""
        given = dict(handler_call_details.invocation_metadata or ()).get(_HEADER, "")
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        if hmac.compare_digest(given_bytes, self._expected):
            return continuation(handler_call_details)
        reason = "no bearer token" if not given else "the bearer token does not match"
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        message = f"unauthenticated: {reason} (the server needs its token: token_file or token_env in the study)"

        def refuse(request: object, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(refuse)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(refuse)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(refuse)
        return grpc.unary_unary_rpc_method_handler(refuse)


@dataclass(frozen=True)
class ClientSecurity:
    """What a client needs for a secured server: its TLS root certificate (PEM) and the token to send."""

    root_certificate: bytes | None = None
    token: str | None = None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata carrying the token (none without one)."""
        return () if self.token is None else ((_HEADER, _SCHEME + self.token),)

    def channel(self, endpoint: str, options: tuple[tuple[str, int], ...]) -> grpc.Channel:
        """A channel to ``endpoint``: TLS when there is a root certificate, plaintext otherwise."""
        if self.root_certificate is None:
            return grpc.insecure_channel(endpoint, options=options)
        credentials = grpc.ssl_channel_credentials(root_certificates=self.root_certificate)
        return grpc.secure_channel(endpoint, credentials, options=options)


def _loopback(host: str) -> bool:
    """Whether ``host`` (as ``--listen`` names it) is reachable from this machine only."""
    host = host.strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(listen: str, security: ServerSecurity) -> str | None:
    """The warning for a server listening beyond loopback without both TLS and a token, or None."""
    if listen.startswith("unix:") or _loopback(listen.rpartition(":")[0]):
        return None
    missing = [
        name for name, present in (("TLS", security.tls), ("a token", security.token is not None)) if not present
    ]
    if not missing:
        return None
    return (
        f"WARNING: listening on {listen}, beyond this machine, without {' or '.join(missing)}: anyone who can "
        "reach it may run work on this server (and read what clients send). Give --tls-cert/--tls-key and "
        f"--token-file (or {TOKEN_ENV}), or listen on 127.0.0.1 or unix:PATH."
    )


def warn_if_exposed(listen: str, security: ServerSecurity, stream: TextIO | None = None) -> None:
    """Print :func:`exposure_warning` on stderr (or ``stream``) when there is one."""
    warning = exposure_warning(listen, security)
    if warning is not None:
        print(warning, file=stream or sys.stderr, flush=True)
