"""``stratasim serve``: one layer's backend as a gRPC server — the command line read into
:class:`~stratasim.remote.serve_options.ServeOptions`, which :func:`~stratasim.remote.serve_main.serve_with` serves.

``python -m stratasim.cli.serve LAYER --backend NAME --listen ENDPOINT`` is the same subcommand without the rest of
the command line (study files, the engine, the report).

``stratasim serve serving`` serves the pricing oracle of serving studies (:mod:`stratasim.remote.serving_service`):
its one backend, ``study``, opens the studies clients send (:mod:`stratasim.study.serving_oracle`), reading study
files under ``--study-root`` only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stratasim.cli.arg_types import positive_int
from stratasim.cli.backend_flags import backend_section
from stratasim.kernel import units
from stratasim.kernel.endpoints import check_endpoint
from stratasim.kernel.errors import StrataSimError, UnitError
from stratasim.remote.limits import Limits
from stratasim.remote.serve_options import LAYERS, ServeOptions

__all__ = ["add_arguments", "handle", "main", "options_of"]

_MAX_REQUEST_BYTES = 2**31 - 1  # what gRPC can receive at all
_SERVING_BACKEND = "study"
"""The serving layer's one backend: the studies its clients send, opened by :mod:`stratasim.study.serving_oracle`."""


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
    if layer not in LAYERS or not colon or not backend:
        raise argparse.ArgumentTypeError(
            f"expected LAYER:BACKEND with LAYER one of {', '.join(LAYERS)} (e.g. compute:roofline), got {text!r}"
        )
    return layer, backend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``stratasim serve``."""
    parser.add_argument("layer", choices=LAYERS, help="the layer to serve")
    parser.add_argument(
        "--backend",
        metavar="NAME",
        help=f"the backend to serve, by registered name (required but for serving, whose one is {_SERVING_BACKEND!r})",
    )
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
    parser.add_argument(
        "--study-root",
        metavar="DIR",
        help="serving: the folder the studies clients name by path, and the files studies name, must lie under "
        "(default: none; clients send a study's text, naming no file)",
    )
    _add_security(parser)
    _add_limits(parser)
    parser.add_argument("--profile", metavar="FILE", help="the table of measured times (profile backend only)")
    parser.add_argument(
        "--objective",
        metavar="NAME",
        help="what the mapper minimises: latency (default), energy or edp (timeloop backend only)",
    )
    parser.add_argument(
        "--launch",
        metavar="MODE",
        help="how kernels are launched: graph (default), eager (at the host time the device file measured) or the "
        "host's time to issue one kernel, e.g. 8us (eager at that time) (measured backend only)",
    )


def _add_security(parser: argparse.ArgumentParser) -> None:
    """``--tls-cert``, ``--tls-key``, ``--tls-client-ca`` and ``--token-file``."""
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


def _add_limits(parser: argparse.ArgumentParser) -> None:
    """``--max-sessions``, ``--idle-timeout``, ``--max-npus``, ``--max-links``, ``--max-request-bytes`` and
    ``--max-work``, their defaults :class:`~stratasim.remote.limits.Limits`'s."""
    limits = parser.add_argument_group("limits", "what one server grants its clients")
    whole = positive_int("a whole number")
    limits.add_argument(
        "--max-sessions",
        type=whole,
        default=Limits.max_sessions,
        metavar="N",
        help="network sessions at once; one more is refused unless one is idle (default: %(default)s)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=Limits.idle_timeout_s,
        metavar="TIME",
        help="a network session idle this long gives its place to a new client when the server is "
        "full, e.g. 60s (default: 300s)",
    )
    for flag, default, what in (
        ("--max-npus", Limits.max_npus, "NPUs a configured topology may have"),
        ("--max-links", Limits.max_links, "links and switches a configured topology may have"),
    ):
        limits.add_argument(flag, type=whole, default=default, metavar="N", help=f"{what} (default: %(default)s)")
    limits.add_argument(
        "--max-request-bytes",
        type=_bytes,
        default=Limits.max_request_bytes,
        metavar="SIZE",
        help="bytes one request may carry, e.g. 256MiB (default: 512MiB)",
    )
    limits.add_argument(
        "--max-work",
        type=whole,
        default=Limits.max_work,
        metavar="N",
        help="steps one compute request may take, as a backend whose cost grows with sizes (timeloop's mapper) "
        "counts them before any work; about 10^7 a second (default: %(default)s)",
    )


def options_of(args: argparse.Namespace) -> ServeOptions:
    """The server's options from its command line; ``--profile``, ``--objective`` and ``--launch`` make the compute
    backend's section, refused (:class:`StrataSimError`) when the compute backend served does not read them."""
    backend = _backend(args)
    section = backend_section(args.profile, args.objective, args.launch)
    if section is not None:
        compute = dict([(args.layer, backend), *([] if args.also is None else [args.also])]).get("compute")
        unread = section.unread(compute)
        if unread is not None:
            raise StrataSimError(f"--{unread[0]} {unread[1]}")
    root = args.study_root
    if root is not None and not Path(root).is_dir():
        raise StrataSimError(f"--study-root: {root!r} is not a folder")
    return ServeOptions(
        args.layer,
        backend,
        args.listen,
        args.also,
        section,
        args.tls_cert,
        args.tls_key,
        args.tls_client_ca,
        args.token_file,
        Limits(
            args.max_sessions,
            args.idle_timeout,
            args.max_npus,
            args.max_links,
            args.max_request_bytes,
            args.max_work,
        ),
        study_root=None if root is None else str(Path(root).resolve()),
    )


def _backend(args: argparse.Namespace) -> str:
    """The backend ``--backend`` names: required for network and compute, ``study`` (the default) for serving."""
    if args.layer != "serving":
        if args.backend is None:
            raise StrataSimError(f"--backend: name the {args.layer} backend to serve")
        return str(args.backend)
    if args.backend not in (None, _SERVING_BACKEND):
        raise StrataSimError(f"--backend: the serving layer serves {_SERVING_BACKEND!r} (the studies clients send)")
    return _SERVING_BACKEND


def _openers(options: ServeOptions) -> dict[str, Callable[..., Any]]:
    """The serving layer's study opener, when it is served (imported only then: it loads the whole study runner)."""
    served = [options.layer, *([] if options.also is None else [options.also[0]])]
    if "serving" not in served:
        return {}
    from stratasim.study.serving_oracle import open_served_study

    return {_SERVING_BACKEND: open_served_study}


def handle(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT (with ``--also``, both layers on one endpoint); bad options (a bad
    ``--profile`` table among them) fail before listening."""
    from stratasim.remote.serve_main import serve_with  # the registry and the server, once a server is asked for

    options = options_of(args)
    serve_with(options, _openers(options))
    return 0


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
