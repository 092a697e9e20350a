"""The kernel every layer stands on: simulated time and events, units, errors, the backend registry, the layer
contracts, the topology grid, operator descriptors and the building blocks of section schemas.

It imports nothing but the generated wire modules (:mod:`stratasim.v1`, :mod:`stratasim.chakra`); an import-linter
contract keeps it so.
"""
