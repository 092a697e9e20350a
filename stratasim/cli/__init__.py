"""The ``stratasim`` command line: one module per subcommand that needs more than a few lines."""

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); see :mod:`stratasim.cli.commands`.

    Imported on call, so that ``python -m stratasim.cli.serve`` loads only what serving needs.
    """
    from stratasim.cli.commands import main as run

    return run(argv)
