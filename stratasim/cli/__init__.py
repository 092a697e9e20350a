"""The ``stratasim`` command line: one module per subcommand that needs more than a few lines."""

from stratasim.cli.commands import main

__all__ = ["main"]
