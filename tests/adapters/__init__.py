"""Tests of the SCALE-Sim and ZigZag adapters, and of the built-in model against their stored results."""
