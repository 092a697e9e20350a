"""Wire details shared by every remote contract: channels, handshakes, deadlines and error mapping.

Written once here so the servicers and clients of each layer stay thin. Errors cross the wire as the
structured ``stratasim.v1.Error``. An exception a backend raises travels with its class name in ``raised``:
a :class:`~stratasim.kernel.errors.StrataSimError` (code INVALID_ARGUMENT,
message ``str(err)``) is re-raised client-side as the same class with the same message, so a run reads
identically in-process and remote; any other exception (code INTERNAL) becomes a BackendError.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import grpc

from stratasim.kernel import errors
from stratasim.kernel.contracts import PROTOCOL_VERSION
from stratasim.kernel.errors import BackendError, RemoteError, StrataSimError
from stratasim.remote.security import ClientSecurity
from stratasim.v1 import common_pb2

__all__ = [
    "CHANNEL_OPTIONS",
    "Watchdog",
    "check_hello",
    "channel_options",
    "check_reply",
    "deadline_error",
    "error_from_exception",
    "hello",
    "open_channel",
    "raise_error",
    "rpc_error",
    "staged",
    "unreachable_error",
    "was_raised",
]

# Windows may carry millions of messages; HTTP proxies must never see loopback traffic.
_MAX_MESSAGE_BYTES = 512 * 1024 * 1024
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.enable_http_proxy", 0),
)

_Code = common_pb2.Error.Code


def channel_options(*, receive_bytes: int = _MAX_MESSAGE_BYTES) -> tuple[tuple[str, int], ...]:
    """:data:`CHANNEL_OPTIONS` with another limit on the bytes of one message received (a server's requests)."""
    kept = tuple(option for option in CHANNEL_OPTIONS if option[0] != "grpc.max_receive_message_length")
    return (*kept, ("grpc.max_receive_message_length", receive_bytes))


_log = logging.getLogger(__name__)


def open_channel(endpoint: str, security: ClientSecurity | None = None) -> grpc.Channel:
    """A channel with the message limits both sides agree on; TLS when ``security`` has a root certificate.

    Clients make their first call (the handshake) with ``wait_for_ready``, so an endpoint that is not up yet
    gets the whole deadline to appear; :func:`unreachable_error` is what a handshake that never came becomes.
    (``grpc.channel_ready_future`` would do the same but leaves a poller that makes ``close`` block ~0.2 s.)
    """
    return (security or ClientSecurity()).channel(endpoint, CHANNEL_OPTIONS)


def staged(message: str, stage: str) -> str:
    """``message`` naming the stage that failed: ``connect``, ``handshake`` or ``call <what>``."""
    return f"{message} (stage: {stage})"


def unreachable_error(layer: str, endpoint: str, timeout_s: float, channel: grpc.Channel | None = None) -> RemoteError:
    """The RemoteError for a peer that did not complete the handshake within the deadline; with the ``channel``,
    one probe that does not wait tells a TLS failure (an untrusted certificate, plaintext on one side) from a peer
    that is not there, and the message says which."""
    why = None if channel is None else _connection_problem(channel)
    if why is not None:
        return RemoteError(staged(f"{layer} layer at {endpoint}: {why}", "connect"))
    return RemoteError(
        staged(f"{layer} layer at {endpoint} is unreachable (no handshake within {timeout_s:g} s)", "connect")
    )


_PROBE = "/stratasim.v1.Probe/Connect"  # no server has it: a connection that works answers UNIMPLEMENTED at once
_PROBE_S = 1.0
_TLS_FAILURES = (
    (
        "CERTIFICATE_VERIFY_FAILED",
        "TLS handshake failed: the server's certificate is not trusted (not signed by the CA this client was given: "
        "check its tls_ca)",
    ),
    (
        "WRONG_VERSION_NUMBER",
        "TLS handshake failed: the server does not speak TLS (it serves plaintext: drop the client's tls_ca, or "
        "start the server with --tls-cert and --tls-key)",
    ),
    ("Peer name", "TLS handshake failed: the server's certificate does not name the host this client dialled"),
    ("handshake failed", "TLS handshake failed"),
    (
        "Socket closed",
        "the server closed the connection before any handshake: it serves TLS, most likely, and this client "
        "speaks plaintext (give the client the server's CA: tls_ca)",
    ),
)


def _connection_problem(channel: grpc.Channel) -> str | None:
    """What keeps ``channel`` from connecting, when gRPC says it is TLS (one call that does not wait for the peer);
    None when the peer answers, or is simply not there."""
    probe = channel.unary_unary(_PROBE)
    try:
        probe(b"", timeout=_PROBE_S)
    except grpc.RpcError as exc:
        if not isinstance(exc, grpc.Call) or exc.code() != grpc.StatusCode.UNAVAILABLE:
            return None
        details = exc.details() or ""
        for marker, why in _TLS_FAILURES:
            if marker.lower() in details.lower():
                return why
    return None


def hello(layer: str, backend: str, capabilities: tuple[str, ...] | list[str] = ()) -> common_pb2.Handshake:
    """The handshake a peer sends: this side's protocol version, the layer, the backend and its capabilities."""
    return common_pb2.Handshake(
        protocol_version=PROTOCOL_VERSION, layer=layer, backend=backend, capabilities=capabilities
    )


def check_hello(request: common_pb2.Handshake, layer: str, backend: str) -> common_pb2.Error | None:
    """Server side: why a client's handshake cannot be served by this ``layer``/``backend``, or None if it can."""
    if request.protocol_version != PROTOCOL_VERSION:
        return common_pb2.Error(
            code=_Code.VERSION_MISMATCH,
            message=f"protocol version mismatch: client speaks {request.protocol_version}, "
            f"server speaks {PROTOCOL_VERSION}",
        )
    if request.layer != layer:
        return common_pb2.Error(
            code=_Code.UNSUPPORTED, message=f"client asked for the {request.layer!r} layer, server runs {layer!r}"
        )
    if request.backend != backend:
        return common_pb2.Error(
            code=_Code.UNSUPPORTED,
            message=f"client asked for backend {request.backend!r}, server runs {backend!r}",
        )
    return None


def check_reply(reply: common_pb2.Handshake, layer: str, backend: str, endpoint: str) -> None:
    """Client side: raise RemoteError unless the server's handshake matches what the client asked for."""
    if reply.protocol_version != PROTOCOL_VERSION:
        raise RemoteError(
            staged(
                f"{layer} layer at {endpoint}: protocol version mismatch: client speaks {PROTOCOL_VERSION}, "
                f"server speaks {reply.protocol_version}",
                "handshake",
            )
        )
    if reply.layer != layer or reply.backend != backend:
        raise RemoteError(
            staged(
                f"{layer} layer at {endpoint}: server runs {reply.layer!r} backend {reply.backend!r}, "
                f"client asked for {layer!r} backend {backend!r}",
                "handshake",
            )
        )


def error_from_exception(exc: Exception) -> common_pb2.Error:
    """Server side: the structured error a backend's exception becomes; unexpected ones are logged in full."""
    raised = type(exc).__name__
    if isinstance(exc, StrataSimError):
        return common_pb2.Error(code=_Code.INVALID_ARGUMENT, message=str(exc), raised=raised)
    _log.exception("backend failed")
    return common_pb2.Error(code=_Code.INTERNAL, message=f"{raised}: {exc}", raised=raised)


def was_raised(error: common_pb2.Error) -> bool:
    """Whether ``error`` stands for an exception the backend raised (rather than an error it returned)."""
    return bool(error.raised)


def raise_error(error: common_pb2.Error, layer: str, endpoint: str, stage: str) -> None:
    """Client side: raise the exception ``error`` stands for (a StrataSim error keeps its class and message, as
    in-process; the wire's own errors name the ``stage``)."""
    name = error.raised
    cls = getattr(errors, name, None) if name in errors.__all__ else None
    if isinstance(cls, type) and issubclass(cls, StrataSimError):
        try:
            exc = cls(error.message)
        except TypeError:  # a constructor that takes more than the message, e.g. ConfigError's
            exc = BackendError(error.message)
        raise exc
    if error.code in (_Code.VERSION_MISMATCH, _Code.UNSUPPORTED):
        raise RemoteError(staged(f"{layer} layer at {endpoint}: {error.message}", stage))
    where = f" ({error.where})" if error.where and not name else ""
    raise BackendError(
        staged(f"{layer} layer at {endpoint} failed: {_Code.Name(error.code)}: {error.message}{where}", stage)
    )


def rpc_error(exc: grpc.RpcError, layer: str, endpoint: str, timeout_s: float, stage: str) -> RemoteError:
    """Client side: the one-line RemoteError for a failed call (``exc`` is a grpc.Call as well) at ``stage``."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    who = f"{layer} layer at {endpoint}"
    if code == grpc.StatusCode.UNAVAILABLE:
        message = f"{who} went away"
    elif code == grpc.StatusCode.CANCELLED:  # the server's doing: this client cancels only through the Watchdog
        message = (
            f"{who} ended the session: it is stopping, or it evicted this session for sitting idle longer "
            "than its --idle-timeout while another client needed the place"
        )
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return deadline_error(layer, endpoint, timeout_s, stage)
    elif code == grpc.StatusCode.UNIMPLEMENTED:
        message = f"{who}: the server does not implement the {layer} service"
    elif code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED):
        message = f"{who}: {details}"
    elif code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        message = f"{who} refused the client: {details}"
    else:
        message = f"{who} failed: {code.name if code is not None else 'UNKNOWN'}: {details}"
    return RemoteError(staged(message, stage))


def deadline_error(layer: str, endpoint: str, timeout_s: float, stage: str) -> RemoteError:
    """The RemoteError for a peer that did not answer in time."""
    return RemoteError(
        staged(f"{layer} layer at {endpoint} did not answer within {timeout_s:g} s (deadline exceeded)", stage)
    )


class Watchdog:
    """Cancels a call whose current read outlives its deadline (grpc stream reads have no timeout of their own).

    A daemon thread polls a few times per deadline, so arming and disarming cost one attribute write each:
    a simulation doing 100k windows pays nothing measurable. ``fired`` tells a cancelled read from a dead peer.
    """

    def __init__(self, timeout_s: float, cancel: Callable[[], object]) -> None:
        self._timeout_s = timeout_s
        self._cancel = cancel
        self._deadline: float | None = None
        self._stop = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="stratasim-remote-watchdog", daemon=True)
        self._thread.start()

    def arm(self, timeout_s: float | None = None) -> None:
        """Start the clock for one read (``timeout_s`` overrides the usual deadline for this read only)."""
        self._deadline = time.monotonic() + (self._timeout_s if timeout_s is None else timeout_s)

    def disarm(self) -> None:
        """The read finished in time."""
        self._deadline = None

    def stop(self) -> None:
        """End the polling thread."""
        self._stop.set()

    def _run(self) -> None:
        period = min(max(self._timeout_s / 10, 0.01), 1.0)
        while not self._stop.wait(period):
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                self.fired = True
                self._deadline = None
                self._cancel()
