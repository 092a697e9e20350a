"""Golden data the tests read, kept in the repository so a plain clone runs every test (see each folder's README)."""

from __future__ import annotations

from pathlib import Path

ASTRA_INPUTS = Path(__file__).resolve().parent / "astra-sim-inputs"
"""ASTRA-sim's reference inputs (networks, systems, Chakra and text workloads) and the cycles it printed for them."""
