"""``stratasim serve``: one layer's backend as a gRPC server.

``python -m stratasim.cli.serve LAYER --backend NAME --listen ENDPOINT`` is the same subcommand without the rest of
the command line (study files, the engine, the report): it imports gRPC, the registry and the backend served, no
more, so a server :func:`~stratasim.remote.spawn` starts listens in a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from stratasim.kernel.endpoints import check_endpoint
from stratasim.kernel.errors import StrataSimError

__all__ = ["add_arguments", "handle", "main"]


def _listen(text: str) -> str:
    try:
        return check_endpoint(text, allow_any_port=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``stratasim serve``."""
    parser.add_argument("layer", choices=("network", "compute"), help="the layer to serve")
    parser.add_argument("--backend", required=True, metavar="NAME", help="the backend to serve, by registered name")
    parser.add_argument(
        "--listen", type=_listen, default="127.0.0.1:50051", metavar="ENDPOINT",
        help="HOST:PORT (port 0: a free one) or unix:PATH; default: %(default)s",
    )  # fmt: skip
    parser.add_argument("--profile", metavar="FILE", help="the table of measured times (profile backend only)")


def handle(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; a bad ``--profile`` table fails before listening."""
    from stratasim import remote  # gRPC is only needed when serving

    factories: dict[str, Any] | None = None
    if args.profile is not None:
        from stratasim.study.compute_setup import PROFILE_BACKEND, build_compute

        if (args.layer, args.backend) != ("compute", PROFILE_BACKEND):
            raise StrataSimError("--profile is read by the profile compute backend only")
        build_compute(args.backend, args.profile).close()  # a bad table fails here, before listening
        factories = {args.backend: lambda: build_compute(args.backend, args.profile)}
    remote.serve(args.layer, args.backend, args.listen, factories=factories)
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
    raise SystemExit(main())
