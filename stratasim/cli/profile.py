"""``stratasim profile``: measure the GPU this runs on with PyTorch, write its profile and the model fitted to it
(:mod:`stratasim.compute_layer.measured.gpu_profile`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stratasim.compute_layer.measured.gpu_profile import profile_gpu
from stratasim.compute_layer.measured.grid import grid

__all__ = ["handle"]


def handle(args: argparse.Namespace) -> int:
    total = len(grid())

    def progress(index: int) -> None:
        if sys.stderr.isatty():
            print(f"\rmeasured {index + 1}/{total}", end="" if index + 1 < total else "\n", file=sys.stderr)

    outputs = profile_gpu(Path(args.out), args.name, args.dtype, args.like, progress=progress)
    print(outputs.held_out)
    print(f"\nwrote {outputs.profile}, {outputs.device}, {outputs.table}")
    return 0
