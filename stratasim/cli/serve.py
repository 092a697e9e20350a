"""``stratasim serve``: one layer's backend as a gRPC server.

``python -m stratasim.cli.serve LAYER --backend NAME --listen ENDPOINT`` is the same subcommand without the rest of
the command line (study files, the engine, the report): it imports gRPC, the registry and the backend served, no
more, so a server :func:`~stratasim.remote.spawn` starts listens in a fraction of a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stratasim.cli.arg_types import positive_int
from stratasim.kernel import units
from stratasim.kernel.endpoints import check_endpoint
from stratasim.kernel.errors import StrataSimError, UnitError

if TYPE_CHECKING:
    from stratasim.remote.security import ServerSecurity

__all__ = ["add_arguments", "handle", "main"]

_LAYERS = ("network", "compute")
_MAX_REQUEST_BYTES = 2**31 - 1  # what gRPC can receive at all


def _listen(text: str) -> str:
    try:
        return check_endpoint(text, allow_any_port=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        seconds = units.parse_time_ps(text) / 1e12
    except UnitError as exc:
        raise argparse.ArgumentTypeError(f"expected a time with its unit, e.g. 600s or 500ms: {exc}") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive time, got {text!r}")
    return seconds


def _bytes(text: str) -> int:
    try:
        size = units.parse_bytes(text)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(f"expected a size with its unit, e.g. 256MiB: {exc}") from None
    if not 1024 <= size <= _MAX_REQUEST_BYTES:
        raise argparse.ArgumentTypeError(f"expected between 1KiB and 2GiB, got {text!r}")
    return size


def _also(text: str) -> tuple[str, str]:
    layer, colon, backend = text.partition(":")
    if layer not in _LAYERS or not colon or not backend:
        raise argparse.ArgumentTypeError(
            f"expected LAYER:BACKEND with LAYER one of {', '.join(_LAYERS)} (e.g. compute:roofline), got {text!r}"
        )
    return layer, backend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``stratasim serve``."""
    parser.add_argument("layer", choices=_LAYERS, help="the layer to serve")
    parser.add_argument("--backend", required=True, metavar="NAME", help="the backend to serve, by registered name")
    parser.add_argument(
        "--listen",
        type=_listen,
        default="127.0.0.1:50051",
        metavar="ENDPOINT",
        help="HOST:PORT (port 0: a free one) or unix:PATH; default: %(default)s",
    )
    parser.add_argument(
        "--also",
        type=_also,
        metavar="LAYER:BACKEND",
        help="serve the other layer too, on the same endpoint (one process for a run's network and compute)",
    )
    secure = parser.add_argument_group(
        "security",
        "TLS and a bearer token (never on the command line, where ps shows it: from a file or the "
        "STRATASIM_TOKEN environment variable); listening beyond loopback without both warns",
    )
    secure.add_argument("--tls-cert", metavar="PEM", help="the server's certificate chain (TLS with --tls-key)")
    secure.add_argument("--tls-key", metavar="PEM", help="the server's private key")
    secure.add_argument(
        "--tls-client-ca", metavar="PEM", help="require client certificates signed by this CA (mutual TLS)"
    )
    secure.add_argument(
        "--token-file",
        metavar="FILE",
        help="every call must carry this file's token (default: $STRATASIM_TOKEN when set)",
    )
    limits = parser.add_argument_group("limits", "what one server grants its clients")
    limits.add_argument(
        "--max-sessions",
        type=positive_int("a whole number"),
        default=16,
        metavar="N",
        help="network sessions at once; one more is refused unless one is idle (default: %(default)s)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=300.0,
        metavar="TIME",
        help="a network session idle this long gives its place to a new client when the server is "
        "full, e.g. 60s (default: 300s)",
    )
    limits.add_argument(
        "--max-npus",
        type=positive_int("a whole number"),
        default=1 << 20,
        metavar="N",
        help="NPUs a configured topology may have (default: %(default)s)",
    )
    limits.add_argument(
        "--max-links",
        type=positive_int("a whole number"),
        default=1 << 21,
        metavar="N",
        help="links and switches a configured topology may have (default: %(default)s)",
    )
    limits.add_argument(
        "--max-request-bytes",
        type=_bytes,
        default=512 << 20,
        metavar="SIZE",
        help="bytes one request may carry, e.g. 256MiB (default: 512MiB)",
    )
    parser.add_argument("--profile", metavar="FILE", help="the table of measured times (profile backend only)")
    parser.add_argument(
        "--objective",
        metavar="NAME",
        help="what the mapper minimises: latency (default), energy or edp (timeloop backend only)",
    )


def handle(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT (with ``--also``, both layers on one endpoint); a bad ``--profile`` table
    fails before listening."""
    from stratasim import remote  # gRPC is only needed when serving

    also = [] if args.also is None else [args.also]
    if also and also[0][0] == args.layer:
        raise StrataSimError(f"--also: {args.layer} is served already; name the other layer")
    backends = dict([(args.layer, args.backend), *also])
    factories: dict[str, Any] | None = None
    if args.profile is not None:
        from stratasim.study.compute_setup import PROFILE_BACKEND, build_compute

        if backends.get("compute") != PROFILE_BACKEND:
            raise StrataSimError("--profile is read by the profile compute backend only")
        build_compute(PROFILE_BACKEND, args.profile).close()  # a bad table fails here, before listening
        factories = {PROFILE_BACKEND: lambda: build_compute(PROFILE_BACKEND, args.profile)}
    if args.objective is not None:
        from stratasim.study.compute_setup import MAPPER_BACKEND, build_compute

        if backends.get("compute") != MAPPER_BACKEND:
            raise StrataSimError(f"--objective chooses what the {MAPPER_BACKEND} compute backend's mapper minimises")
        try:
            build_compute(MAPPER_BACKEND, objective=args.objective).close()  # a bad objective fails before listening
        except ValueError as exc:
            raise StrataSimError(f"--objective: {exc}") from None
        factories = {MAPPER_BACKEND: lambda: build_compute(MAPPER_BACKEND, objective=args.objective)}
    from stratasim.remote.limits import Limits

    limits = Limits(
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout,
        max_npus=args.max_npus,
        max_links=args.max_links,
        max_request_bytes=args.max_request_bytes,
    )
    remote.serve(
        args.layer, args.backend, args.listen, factories=factories, also=also, security=_security(args), limits=limits
    )
    return 0


def _security(args: argparse.Namespace) -> ServerSecurity:
    """The server's TLS material and token from the options (and STRATASIM_TOKEN), every file read now: a missing
    one fails before listening, naming its option."""
    from stratasim.remote.security import TOKEN_ENV, ServerSecurity, read_pem, token_from

    if (args.tls_cert is None) != (args.tls_key is None):
        raise StrataSimError("--tls-cert and --tls-key go together: give both for TLS, or neither")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise StrataSimError("--tls-client-ca asks clients for certificates over TLS: give --tls-cert and --tls-key")
    env = TOKEN_ENV if args.token_file is None and TOKEN_ENV in os.environ else None
    token = token_from(args.token_file, env, what_file="--token-file", what_env="the server's token")
    return ServerSecurity(
        token=token,
        certificate=None if args.tls_cert is None else read_pem(args.tls_cert, "--tls-cert"),
        private_key=None if args.tls_key is None else read_pem(args.tls_key, "--tls-key", key=True),
        client_ca=None if args.tls_client_ca is None else read_pem(args.tls_client_ca, "--tls-client-ca"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m stratasim.cli.serve``: exit 0 when stopped, 2 with one ``error: ...`` line for bad input."""
    parser = argparse.ArgumentParser(prog="stratasim serve", description="Serve one layer's backend over gRPC.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return handle(args)
    except StrataSimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # The backends are closed and the server stopped by now: exit without the interpreter's teardown (gRPC's
    # threads, numpy), some tens of milliseconds a run spawning this server would otherwise wait for.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
