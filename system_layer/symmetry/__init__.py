"""NPUs equivalent by symmetry simulated once: when aggregation is safe and who stands in for whom."""
