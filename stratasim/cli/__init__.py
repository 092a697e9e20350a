"""The ``stratasim`` command line: one module per subcommand that needs more than a few lines."""

import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); see :mod:`stratasim.cli.commands`.

    Imported on call, so that ``python -m stratasim.cli.serve`` loads only what serving needs. gRPC's C core is told
    to keep its own log lines off stderr (unless the user set ``GRPC_VERBOSITY``): every failure reaches the user as
    one ``error:`` line, and a core line (a failed bind's ``add_port.cc``, say) must not come first. Ctrl-C while
    those imports run (they take a second or more) ends it as Ctrl-C does later: one line and exit code 130.
    """
    try:
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # read once, when grpc is first imported below
        from stratasim.cli.commands import main as run

        return run(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
