"""Regenerate the Python modules and type stubs of the StrataSim protos.

Run from anywhere: ``python proto/generate.py [OUT_ROOT]``. The modules land in ``OUT_ROOT/stratasim/v1``
(the contracts, with gRPC services) and ``OUT_ROOT/stratasim/chakra`` (the Chakra trace schema, messages only),
default: the repository root, next to the hand-written ``__init__.py`` files. Needs the ``test`` extra
(grpcio-tools and mypy-protobuf at the pinned versions, so output is byte-for-byte reproducible).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PACKAGES = (("stratasim/v1", True), ("stratasim/chakra", False))
"""Each proto directory and whether it defines gRPC services (and so gets ``*_pb2_grpc`` modules)."""


def _protos(package: str) -> list[str]:
    return sorted(p.relative_to(PROTO_ROOT).as_posix() for p in (PROTO_ROOT / package).glob("*.proto"))


def _plugin(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    return f"--plugin={name}={path}"


def generate(out_root: Path) -> list[Path]:
    """Run protoc on every proto, writing modules and stubs under ``out_root``; return the files written."""
    from grpc_tools import protoc  # imported here: only developers regenerating need grpcio-tools

    out_root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for package, with_grpc in PACKAGES:
        args = ["protoc", f"-I{PROTO_ROOT}", f"--python_out={out_root}", f"--mypy_out={out_root}"]
        args.append(_plugin("protoc-gen-mypy"))
        if with_grpc:
            args += [f"--grpc_python_out={out_root}", f"--mypy_grpc_out={out_root}", _plugin("protoc-gen-mypy_grpc")]
        status = protoc.main([*args, *_protos(package)])
        if status != 0:
            raise SystemExit(f"protoc failed on {package} with status {status}")
        written += sorted((out_root / package).glob("*_pb2*.py*"))
    return written


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT.parent
    for written in generate(root):
        print(written)
