"""Network backends: each implements :class:`stratasim.contracts.NetworkBackend` and registers by name."""
