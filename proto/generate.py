"""Regenerate the Python modules and type stubs of the StrataSim protos.

Run from anywhere: ``python proto/generate.py [OUT_ROOT]``. The modules land in ``OUT_ROOT/stratasim/v1``
(default: the repository root), next to the hand-written ``__init__.py``. Needs the ``test`` extra
(grpcio-tools and mypy-protobuf at the pinned versions, so output is byte-for-byte reproducible).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PROTO_FILES = sorted(p.relative_to(PROTO_ROOT).as_posix() for p in (PROTO_ROOT / "stratasim" / "v1").glob("*.proto"))


def generate(out_root: Path) -> list[Path]:
    """Run protoc on every proto, writing modules and stubs under ``out_root``; return the files written."""
    from grpc_tools import protoc  # imported here: only developers regenerating need grpcio-tools

    out_root.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out_root}",
        f"--grpc_python_out={out_root}",
        f"--mypy_out={out_root}",
        f"--mypy_grpc_out={out_root}",
    ]
    for plugin in ("protoc-gen-mypy", "protoc-gen-mypy_grpc"):
        path = shutil.which(plugin) or str(Path(sys.executable).parent / plugin)
        args.append(f"--plugin={plugin}={path}")
    status = protoc.main([*args, *PROTO_FILES])
    if status != 0:
        raise SystemExit(f"protoc failed with status {status}")
    return sorted((out_root / "stratasim" / "v1").glob("*_pb2*.py*"))


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT.parent
    for written in generate(root):
        print(written)
