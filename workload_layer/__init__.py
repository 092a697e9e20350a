"""Workloads: each yields per-NPU execution graphs (:class:`stratasim.contracts.WorkloadSource`)."""
