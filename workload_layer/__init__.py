"""Workloads: each yields per-NPU execution graphs (:class:`stratasim.kernel.contracts.WorkloadSource`)."""
