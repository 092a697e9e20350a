"""Importers: another simulator's input files → a StrataSim study (a mapping :func:`~stratasim.config.parse_study`
accepts), so the same system can be run, and compared, in both tools.

:mod:`stratasim.importers.astra` reads ASTRA-sim 2.x's analytical network YAML and system JSON.
"""

__all__: list[str] = []
