"""Fixtures for the importer tests: the ASTRA-sim reference inputs, and small input files written on the fly.

The reference inputs live in the repository, in ``tests/data/astra-sim-inputs`` (see its README).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.data import ASTRA_INPUTS

RING_8 = "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
RING_4CHUNKS: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
}


@pytest.fixture
def inputs() -> Path:
    """The ASTRA-sim reference inputs folder."""
    return ASTRA_INPUTS


@pytest.fixture
def files(tmp_path: Path) -> Callable[..., tuple[Path, Path]]:
    """``files(network=TEXT, system=DICT_OR_TEXT, **system_changes)`` writes a network YAML and a system JSON
    (by default Ring_8npus.yml and Ring_4chunks.json; a change of None removes that key) and returns their paths."""

    def write(network: str = RING_8, system: dict[str, Any] | str | None = None, **changes: Any) -> tuple[Path, Path]:
        if system is None:
            system = {**RING_4CHUNKS, **{key.replace("_", "-"): value for key, value in changes.items()}}
            system = {key: value for key, value in system.items() if value is not None}
        net_path, sys_path = tmp_path / "net.yml", tmp_path / "sys.json"
        net_path.write_text(network, encoding="utf-8")
        sys_path.write_text(system if isinstance(system, str) else json.dumps(system, indent=2), encoding="utf-8")
        return net_path, sys_path

    return write
