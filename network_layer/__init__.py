"""Network backends: each implements :class:`stratasim.kernel.contracts.NetworkBackend` and registers by name."""
