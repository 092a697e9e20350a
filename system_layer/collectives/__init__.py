"""Collectives and their algorithms: groups laid onto the topology, phases, per-step plans, chunks in flight."""
