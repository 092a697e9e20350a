"""``stratasim cost``: one operator's cost from one or more compute backends; the pricing itself is
:mod:`stratasim.cli.cost`, imported only when the command runs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from stratasim.kernel.errors import StrataSimError

if TYPE_CHECKING:
    from stratasim.cli.arg_types import Subparsers

__all__ = ["add_cost"]


def _cost(args: argparse.Namespace) -> int:
    from stratasim.cli import cost
    from stratasim.config.operator_text import operator_from

    given: dict[str, str] = {}
    for pair in args.dims:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise StrataSimError(f"expected KEY=VALUE such as M=4096, got {pair!r}")
        given[key.lower()] = value
    for key in ("m", "k", "n", "batch", "shape", "flops_per_element", "inputs"):
        value = getattr(args, key)
        if value is not None:
            if key in given and given[key] != value:
                raise StrataSimError(f"{key} is given twice, as {given[key]} and {value}")
            given[key] = value
    op = operator_from(args.kind, given, args.dtype)
    results = cost.price(
        op,
        args.backend or ["roofline"],
        args.device,
        args.profile,
        args.objective,
        datasheet=args.datasheet,
        launch=args.launch,
    )
    if args.json:
        print(json.dumps(cost.to_dict(op, results), indent=2))
    else:
        print(cost.to_text(op, results))
    return 0


def add_cost(subparsers: Subparsers) -> None:
    """The ``cost`` subcommand."""
    parser = subparsers.add_parser(
        "cost",
        help="one operator's cost from one or more compute backends",
        description="e.g. stratasim cost gemm M=4096 K=4096 N=4096 --backend roofline --backend profile "
        "--profile times.csv --device h100; stratasim cost conv N=1 K=64 C=3 P=112 Q=112 R=7 S=7 stride=2 --device "
        "h100; stratasim cost elementwise shape=4096x4096 --device h100; stratasim cost attention batch=32 queries=4096 "
        "keys=4096 head_dim=128 causal=true --device h100; stratasim cost gemm M=8192 K=8192 N=8192 --device '{preset: h100, "
        "memory_bandwidth: 4TB/s}'",
    )
    parser.add_argument("kind", choices=("gemm", "conv", "elementwise", "attention"), help="the operator kind")
    parser.add_argument(
        "dims",
        nargs="*",
        metavar="KEY=VALUE",
        help="gemm: M= K= N= [B=]; conv: N= K= C= P= Q= R= "
        "S= [stride=]; elementwise: shape=AxB [flops=] [inputs=] [function=]; attention: batch= queries= keys= "
        "head_dim= [group=] [causal=true] [backward=true]",
    )
    for key in ("m", "k", "n", "batch", "shape"):
        parser.add_argument(f"--{key}", metavar=key.upper(), help=f"same as {key.upper()}=")
    parser.add_argument("--flops-per-element", dest="flops_per_element", metavar="F", help="elementwise: FLOPs each")
    parser.add_argument("--inputs", metavar="I", help="elementwise: input tensors (default 1)")
    parser.add_argument("--dtype", default="bf16", help="default: %(default)s")
    parser.add_argument("--backend", action="append", metavar="NAME", help="repeat to compare (default roofline)")
    parser.add_argument(
        "--device",
        required=True,
        action="append",
        metavar="DEVICE",
        help="the device to price on: once for every backend, or once per --backend, in order; a "
        "preset's name (h100) or, as a study's compute.device, a device described in YAML flow text "
        "('{preset: h100, memory_bandwidth: 4TB/s}', a whole device, or '{file: chip.yaml}' relative "
        "to the working folder)",
    )
    parser.add_argument("--profile", metavar="FILE", help="the table of measured times of the profile backend")
    parser.add_argument(
        "--objective",
        metavar="NAME",
        help="what the timeloop backend's mapper minimises: latency (default), energy or edp",
    )
    parser.add_argument(
        "--datasheet",
        action="store_true",
        help="price on the device's datasheet figures, not the efficiency model fitted to measurements",
    )
    parser.add_argument(
        "--launch",
        metavar="MODE",
        help="how the measured backend's kernels are launched: graph (default), eager (at the host time the device "
        "file measured) or the host's time to issue one kernel, e.g. 8us (eager at that time)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (and nothing else) on stdout")
    parser.set_defaults(handler=_cost)
