"""Optimal mappings of workloads onto systems (DFModel): mixed-integer programs solved with HiGHS."""
