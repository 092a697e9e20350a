"""``stratasim roofline``: a device's roofline and where operators land on it, drawn by
:mod:`stratasim.report.roofline_plot` (imported only when the command runs)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from stratasim.cli.arg_types import lazy_handler

if TYPE_CHECKING:
    from stratasim.cli.arg_types import Subparsers

__all__ = ["add_arguments", "add_roofline", "handle"]


def add_roofline(subparsers: Subparsers) -> None:
    """The ``roofline`` subcommand."""
    parser = subparsers.add_parser("roofline", help="plot a device's roofline and where operators land on it")
    add_arguments(parser)
    parser.set_defaults(handler=lazy_handler(__name__))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``stratasim roofline``."""
    parser.add_argument(
        "--device",
        required=True,
        help="a roofline preset device (a100, h100, h200, b200, mi300x, tpuv4, tpuv5p, gaudi3), or one described "
        "as compute.device describes it: '{preset: h100, memory_bandwidth: 4TB/s}', '{file: chip.yaml}'",
    )
    parser.add_argument("--from-report", dest="report", metavar="REPORT", help="plot the operators of a report.json")
    parser.add_argument(
        "--op",
        action="append",
        default=[],
        metavar="KIND:K=V,...",
        help="plot an operator priced by the roofline, e.g. gemm:M=4096,K=4096,N=4096 (repeatable)",
    )
    parser.add_argument("--dtype", default="bf16", help="dtype of --op operators that name none (default %(default)s)")
    parser.add_argument("--compute-efficiency", type=float, default=0.0, metavar="E", help="calibrate the device")
    parser.add_argument("--memory-efficiency", type=float, default=0.0, metavar="E", help="calibrate the device")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the plot, *.png or *.svg")


def handle(args: argparse.Namespace) -> int:
    """``--device`` read as ``compute.device`` is (a preset, or a device described in YAML), then plotted."""
    from stratasim.compute_layer.device_section import DeviceSection
    from stratasim.config.device_option import device_option
    from stratasim.report import roofline_plot

    section = device_option(args.device, "roofline", command="stratasim roofline")
    described = section.device.device() if isinstance(section.device, DeviceSection) else None
    return roofline_plot.run_from_args(args, described)
