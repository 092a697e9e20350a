"""StrataSim: layered, multi-fidelity co-simulation of distributed deep-learning systems.

This package is the composition root (CLI, config, study runner, reports) and the small kernel every layer
shares: time and units (:mod:`stratasim.units`), the event queue (:mod:`stratasim.events`), the layer
contracts (:mod:`stratasim.contracts`), the backend registry (:mod:`stratasim.registry`) and typed errors.
"""

__version__ = "0.1.0"
