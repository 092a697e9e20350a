"""Optimisers that map a workload onto a system exactly, as DFModel does, with mixed-integer programs."""
