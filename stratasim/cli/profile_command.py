"""The ``profile`` subcommand's options; measuring is :mod:`stratasim.cli.profile`, imported only then."""

from __future__ import annotations

import argparse

from stratasim.cli.arg_types import Subparsers, lazy_handler
from stratasim.compute_layer.measured.structures import STRUCTURES

__all__ = ["add_profile"]


_EPILOG = """writes into DIR:
  NAME.csv          the measured profile (the reference profiles' CSV format)
  NAME.device.yaml  the operator-level model fitted to it, with its held-out errors printed; a study prices
                    every operator on it with
                    compute: {backend: measured, device: {file: DIR/NAME.device.yaml}}
  NAME.profile.csv  GEMM and element-wise points for the profile backend; a study replays them with
                    compute: {backend: profile, profile: DIR/NAME.profile.csv, device: NAME}
needs PyTorch (pip install 'stratasim[profile]') and a CUDA GPU; takes about a minute."""


def add_profile(subparsers: Subparsers) -> None:
    """The ``profile`` subcommand."""
    parser = subparsers.add_parser(
        "profile",
        help="measure this machine's GPU with PyTorch and fit the operator model to it",
        description="Times every operator of the reference profiles' grid on GPU 0 (CUDA-graph replay, medians), "
        "writes the profile, fits the measured backend's operator model to it and prints the held-out errors.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="the folder to write the three files into")
    parser.add_argument(
        "--name", help="the device name the files and the profile table use (default: from the GPU's name)"
    )
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16", help="the data type (default bf16)")
    parser.add_argument(
        "--like",
        choices=STRUCTURES,
        help="the preset whose tiling and L2 the fit assumes (default: the one the GPU's name names, else h100)",
    )
    parser.set_defaults(handler=lazy_handler("stratasim.cli.profile"))
