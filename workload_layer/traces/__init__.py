"""Traces replayed unchanged: Chakra execution traces, ASTRA-sim 1.0 text workloads, and conversions between them."""
