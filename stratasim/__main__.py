"""``python -m stratasim``: the same command line as the ``stratasim`` script."""

from stratasim.cli import main

raise SystemExit(main())
