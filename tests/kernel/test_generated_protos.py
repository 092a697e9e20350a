"""The committed protobuf modules and stubs are exactly what ``proto/generate.py`` produces from ``proto/``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("proto_generate", REPO / "proto" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_in_sync_with_the_protos(tmp_path: Path) -> None:
    written = _generator().generate(tmp_path)
    fresh = {path.name: path.read_text() for path in written}
    committed = {
        path.name: path.read_text()
        for package in ("v1", "chakra")
        for path in (REPO / "stratasim" / package).glob("*_pb2*.py*")
    }
    assert sorted(fresh) == sorted(committed), "generated file set differs: run python proto/generate.py"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"out of date with proto/: {stale}; run python proto/generate.py"
