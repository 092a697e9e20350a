"""ASTRA-sim's chunk scheduler per NPU, and the cost of reducing received data into the local buffer."""
