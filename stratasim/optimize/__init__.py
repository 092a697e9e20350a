"""Finding the best plan and system for a study: DFModel's mapping passes and what they optimise."""
