"""Replay a serving study's requests through StrataSim's request-level loop, every batch priced by the serving
pricing oracle (``stratasim serve serving``) instead of in-process, and print TTFT and TPOT.

    python examples/oracle/replay_trace.py                       # starts an oracle in this process
    python examples/oracle/replay_trace.py --endpoint HOST:PORT  # asks one already running
    python examples/oracle/replay_trace.py --set workload.requests.count=200 --per-request

The study (default ``examples/serving/llama3_70b_h100_tp8.yaml``) is read here for its requests and scheduler, and
sent to the oracle as text for its pricing: the loop's iteration, expert and KV-move pricers are the client's
(:class:`stratasim.remote.ServingPricerClient`), so every price crosses the wire. The figures equal ``stratasim run``'s
of the same study to the picosecond (``tests/remote/test_serving_oracle.py`` checks it, request by request).
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stratasim.config.study_file import load_study
from stratasim.kernel.serving import ServingResult
from stratasim.remote import ServingPricerClient, serve
from stratasim.study.serving_oracle import open_served_study
from stratasim.workload_layer.serving.pool_run import PoolRun
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

STUDY = Path(__file__).resolve().parents[1] / "serving" / "llama3_70b_h100_tp8.yaml"


@dataclass(frozen=True)
class RequestTimes:
    """One request's times, in picoseconds: arrival, first token and last token, and its output tokens."""

    index: int
    arrival_ps: int
    first_token_ps: int
    finish_ps: int
    output_tokens: int

    @property
    def ttft_ps(self) -> int:
        """Time to first token."""
        return self.first_token_ps - self.arrival_ps

    @property
    def tpot_ps(self) -> float | None:
        """Time per output token after the first (None for a one-token request)."""
        if self.output_tokens < 2:
            return None
        return (self.finish_ps - self.first_token_ps) / (self.output_tokens - 1)


def request_times(run: PoolRun) -> list[RequestTimes]:
    """Every request's times in a loop's run, by request index."""
    rows = [
        RequestTimes(s.request.index, s.request.arrival_ps, s.first_token_ps, s.finish_ps, s.request.output_tokens)
        for s in run.sequences
    ]
    return sorted(rows, key=lambda row: row.index)


@dataclass(frozen=True)
class Replayed:
    """A replay's requests' times, the loop's run (its iterations and KV moves) and its result (figures, energy)."""

    times: list[RequestTimes]
    run: PoolRun
    result: ServingResult


def replay(study: Path, overrides: Sequence[str], endpoint: str) -> Replayed:
    """Run ``study``'s requests through the loop with the oracle at ``endpoint`` pricing every batch."""
    workload = load_study(study, overrides).workload.build()
    assert isinstance(workload, ServingRequestsWorkload), "the oracle replays serving studies (kind: serving)"
    with ServingPricerClient(endpoint, text=study.read_text(), overrides=overrides) as client:
        pools = client.description.pools
        capacities = [(pool.memory_capacity_bytes or None, pool.memory_unknown) for pool in pools]
        runs: list[PoolRun] = []
        pricers = [client.pool_pricers(pool.name) for pool in pools]
        result = workload.serve(pricers, capacities, client.kv_transfer(), runs=runs)
    return Replayed(request_times(runs[0]), runs[0], result)


@contextmanager
def oracle() -> Iterator[str]:
    """A serving oracle on a free loopback port, in a thread of this process, for the block; yields its endpoint."""
    stop = threading.Event()
    ready: queue.SimpleQueue[str | BaseException] = queue.SimpleQueue()

    def run() -> None:
        try:
            factories = {"study": open_served_study}
            serve("serving", "study", "127.0.0.1:0", ready=ready.put, factories=factories, stop=stop)
        except BaseException as exc:  # handed to the caller waiting below
            ready.put(exc)

    thread = threading.Thread(target=run, name="serving-oracle", daemon=True)
    thread.start()
    endpoint = ready.get(timeout=30)
    if isinstance(endpoint, BaseException):
        raise endpoint
    try:
        yield endpoint
    finally:
        stop.set()
        thread.join(timeout=10)


def _print(times: list[RequestTimes], per_request: bool) -> None:
    ttft = [row.ttft_ps for row in times]
    tpot = [value for row in times if (value := row.tpot_ps) is not None]
    print(f"{len(times)} requests")
    for name, values in (("TTFT", ttft), ("TPOT", tpot)):
        if values:
            cut = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
            print(
                f"{name}: mean {statistics.fmean(values) / 1e9:.3f} ms, p50 {cut[49] / 1e9:.3f} ms, "
                f"p99 {cut[98] / 1e9:.3f} ms"
            )
    if per_request:
        print("request  ttft_ps  tpot_ps")
        for row in times:
            print(f"{row.index} {row.ttft_ps} {'-' if row.tpot_ps is None else repr(row.tpot_ps)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", type=Path, default=STUDY, help="a serving study (default: %(default)s)")
    parser.add_argument("--endpoint", help="an oracle already serving (default: start one in this process)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--per-request", action="store_true", help="print each request's TTFT and TPOT (ps)")
    args = parser.parse_args(argv)
    if args.endpoint is not None:
        replayed = replay(args.study, args.overrides, args.endpoint)
    else:
        with oracle() as endpoint:
            replayed = replay(args.study, args.overrides, endpoint)
    _print(replayed.times, args.per_request)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
