"""Vidur's synthetic request stream, drawn as Vidur draws it, written as a plain StrataSim request trace.

Vidur (microsoft/vidur, ``vidur/request_generator``) makes ``num_requests`` requests with Poisson gaps
(``-log(1 - random.random()) / qps`` after ``random.seed(seed)``, each gap capped at ``3 / qps``; the first request
arrives one gap after 0) and lengths from a processed trace file (``num_prefill_tokens,num_decode_tokens,...``):
each row's total is cut to ``max_tokens`` by taking ``ceil`` of the excess from prompt and output in proportion,
both kept at least 1, and the rows are shuffled with ``DataFrame.sample(frac=1, random_state=seed)``, which is
``numpy.random.RandomState(seed).permutation``. Its output tokens count the first one, which the prefill yields, as
StrataSim's do. So the same file, seed, rate and count give the requests Vidur simulates, here as a CSV of
``arrival_s,prompt_tokens,output_tokens`` that ``workload.requests.trace`` replays::

    python -m tools.vidur_requests vidur/data/processed_traces/splitwise_conv.csv --qps 6.45 --count 512 \\
        --max-tokens 16384 > examples/serving/vidur/llama3_8b_conv_6.45qps.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["clipped_lengths", "vidur_requests", "main"]


def clipped_lengths(rows: Iterable[tuple[int, int]], max_tokens: int) -> list[tuple[int, int]]:
    """Each ``(prompt, output)`` cut to ``max_tokens`` in all as Vidur's trace length generator cuts it."""
    lengths = []
    for prompt, output in rows:
        total = prompt + output
        excess = max(total - max_tokens, 0)
        prompt -= math.ceil(excess * (prompt / total))
        output -= math.ceil(excess * (output / total))
        lengths.append((max(prompt, 1), max(output, 1)))
    return lengths


def vidur_requests(
    rows: Sequence[tuple[int, int]], count: int, qps: float, max_tokens: int, seed: int = 42
) -> list[tuple[float, int, int]]:
    """The first ``count`` requests Vidur's synthetic generator draws from trace ``rows`` at ``qps`` (module
    docstring): ``(arrival in seconds, prompt tokens, output tokens)``."""
    lengths = clipped_lengths(rows, max_tokens)
    order = np.random.RandomState(seed).permutation(len(lengths))
    draw = random.Random(seed)
    cap, now, requests = 3.0 / qps, 0.0, []
    for index in order[:count]:
        now += min(-math.log(1.0 - draw.random()) / qps, cap)
        requests.append((now, *lengths[index]))
    return requests


def _read(path: Path) -> list[tuple[int, int]]:
    """The ``(num_prefill_tokens, num_decode_tokens)`` rows of a Vidur processed trace (floats cut to integers)."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            (int(float(row["num_prefill_tokens"])), int(float(row["num_decode_tokens"])))
            for row in csv.DictReader(handle)
        ]


def main(argv: Sequence[str] | None = None) -> int:
    """Write Vidur's request stream for the given trace file and settings to standard output."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a Vidur processed trace (data/processed_traces/*.csv)")
    parser.add_argument("--qps", type=float, required=True, help="Poisson rate, requests per second")
    parser.add_argument("--count", type=int, required=True, help="requests to draw")
    parser.add_argument("--max-tokens", type=int, default=4096, help="Vidur's max_tokens (default 4096)")
    parser.add_argument("--seed", type=int, default=42, help="Vidur's seed (default 42)")
    args = parser.parse_args(argv)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["arrival_s", "prompt_tokens", "output_tokens"])
    for arrival, prompt, output in vidur_requests(_read(args.trace), args.count, args.qps, args.max_tokens, args.seed):
        out.writerow([repr(arrival), prompt, output])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
