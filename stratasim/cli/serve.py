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
from typing import Any

from stratasim.kernel.endpoints import check_endpoint
from stratasim.kernel.errors import StrataSimError

__all__ = ["add_arguments", "handle", "main"]

_LAYERS = ("network", "compute")


def _listen(text: str) -> str:
    try:
        return check_endpoint(text, allow_any_port=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _also(text: str) -> tuple[str, str]:
    layer, colon, backend = text.partition(":")
    if layer not in _LAYERS or not colon or not backend:
        raise argparse.ArgumentTypeError(f"expected LAYER:BACKEND with LAYER one of {', '.join(_LAYERS)} "
                                         f"(e.g. compute:roofline), got {text!r}")  # fmt: skip
    return layer, backend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``stratasim serve``."""
    parser.add_argument("layer", choices=_LAYERS, help="the layer to serve")
    parser.add_argument("--backend", required=True, metavar="NAME", help="the backend to serve, by registered name")
    parser.add_argument(
        "--listen", type=_listen, default="127.0.0.1:50051", metavar="ENDPOINT",
        help="HOST:PORT (port 0: a free one) or unix:PATH; default: %(default)s",
    )  # fmt: skip
    parser.add_argument(
        "--also", type=_also, metavar="LAYER:BACKEND",
        help="serve the other layer too, on the same endpoint (one process for a run's network and compute)",
    )  # fmt: skip
    parser.add_argument("--profile", metavar="FILE", help="the table of measured times (profile backend only)")
    parser.add_argument("--objective", metavar="NAME",
                        help="what the mapper minimises: latency (default), energy or edp (timeloop backend only)")  # fmt: skip


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
    remote.serve(args.layer, args.backend, args.listen, factories=factories, also=also)
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
