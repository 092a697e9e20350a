"""The first-order model's closed forms and its refusals: the pipeline bubble, monotonicity in bandwidth, and one
clear error for every study or plan it cannot estimate."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stratasim.config.study_file import load_study, parse_study
from stratasim.optimize import FirstOrderError, FirstOrderModel, estimate_plans
from stratasim.optimize.first_order import compose
from stratasim.optimize.first_order_passes import BlockTimes, PassTime, ring_core_ps
from stratasim.optimize.first_order_plan import PlanFigures, transfers_hidden
from stratasim.optimize.first_order_walk import stage_ends
from stratasim.workload_layer.transformer.memory import StageMemory
from tests.optimize.test_first_order_engine import BASE

NOTHING = BlockTimes(PassTime(), PassTime())


def _figures(pp: int, v: int, m: int, forward: int, backward: int, layers: int = 2) -> PlanFigures:
    """A plan whose stages do nothing but ``layers`` layers per chunk of ``forward`` and ``backward`` ps each."""
    return PlanFigures(
        pp=pp,
        virtual_stages=v,
        micro_batches=m,
        schedule="interleaved" if v > 1 else "1f1b",
        chunk_layers=layers,
        layer=BlockTimes(PassTime(compute=forward), PassTime(compute=backward)),
        embedding=NOTHING,
        head=NOTHING,
        gather_ps=0,
        send_ps=(0,) * pp if pp > 1 else (),
        gradient_ps=((0, 0),) * 3,
        optimizer_ps=(0, 0, 0),
        memory=StageMemory(0, 0, 0, 0),
    )


@pytest.mark.parametrize(("pp", "v", "m"), [(1, 1, 8), (4, 1, 8), (8, 1, 32), (4, 2, 8), (4, 4, 16), (2, 3, 4)])
def test_bubble_is_pp_minus_one_chunk_passes(pp: int, v: int, m: int) -> None:
    # A stage runs m v chunk passes of 2 (f + b); the bubble is (pp - 1) chunk passes, (pp - 1) / v stage passes.
    f, b = 1_000, 2_000
    iteration, terms = compose([_figures(pp, v, m, f, b)])
    chunk = 2 * (f + b)
    assert terms["pipeline_bubble"][0] == (pp - 1) * chunk
    assert iteration[0] == (m * v + pp - 1) * chunk


def test_iteration_falls_as_the_data_parallel_links_get_faster() -> None:
    def estimate(bandwidth: str) -> tuple[int, int]:
        data = copy.deepcopy(BASE)
        data["workload"]["parallelism"] = {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32}
        data["network"]["topology"][2]["bandwidth"] = bandwidth
        estimates = estimate_plans(parse_study(data, "tiny.yaml"), [{}])
        return int(estimates.iteration_ps[0]), int(estimates.terms["dp_comm"][0])

    slow, fast = estimate("25GB/s"), estimate("100GB/s")
    assert fast[0] < slow[0] and fast[1] < slow[1]


def _tiny(**plan: Any) -> Any:
    data = copy.deepcopy(BASE)
    data["workload"]["parallelism"] = {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, **plan}
    return parse_study(data, "tiny.yaml")


@pytest.mark.parametrize(
    ("plan", "said"),
    [
        ({"dp_bucket": "64MiB", "schedule": "zb_h1"}, "dp_bucket"),
        ({"workload.parallelism.tp": 2}, "tp * cp * pp * dp = 16, but the topology has 32 NPUs"),
        ({"tp": 3, "dp": 4, "pp": 2}, "plan {'tp': 3"),
    ],
)
def test_a_plan_it_cannot_estimate_is_refused_with_the_reason(plan: dict[str, Any], said: str) -> None:
    with FirstOrderModel(_tiny()) as model, pytest.raises(FirstOrderError, match=said.replace("*", r"\*")):
        model.estimate([plan])


def test_estimate_supported_prices_what_it_can_and_says_why_not_the_rest() -> None:
    plans = [{}, {"dp_bucket": "64MiB", "schedule": "zb_h1"}, {"schedule": "gpipe"}]
    with FirstOrderModel(_tiny()) as model:
        estimates, declined = model.estimate_supported(plans)
        expected = model.estimate([plans[0], plans[2]])
    assert estimates.plans == (plans[0], plans[2]) and (estimates.iteration_ps == expected.iteration_ps).all()
    assert declined == {
        1: "gradient buckets (parallelism.dp_bucket) under the interleaved or a split schedule are not modelled"
    }


@pytest.mark.parametrize("algorithm", ["one_ring", "direct:2"])
def test_an_algorithm_without_a_closed_form_is_refused(algorithm: str) -> None:
    data = copy.deepcopy(BASE)
    data["workload"]["parallelism"] = {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32}
    data["system"]["algorithm"] = algorithm
    with pytest.raises(FirstOrderError, match=f"no closed form for algorithm '{algorithm}'"):
        estimate_plans(parse_study(data, "tiny.yaml"), [{}])


@pytest.mark.parametrize(
    ("system", "said"),
    [
        ({"reduction": "compute"}, "reductions priced on the compute layer"),
        ({"preset": "astra_compat"}, "the astra_compat preset's semantics"),
    ],
)
def test_system_semantics_without_a_closed_form_are_refused(system: dict[str, Any], said: str) -> None:
    data = copy.deepcopy(BASE)
    data["workload"]["parallelism"] = {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32}
    data["system"].update(system)
    with pytest.raises(FirstOrderError, match=f"system: no closed form for {said}"):
        FirstOrderModel(parse_study(data, "tiny.yaml"))


def test_a_study_that_is_no_transformer_is_refused() -> None:
    with pytest.raises(FirstOrderError, match="kind: transformer"):
        FirstOrderModel(load_study(Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"))


def test_no_plan_fitting_the_memory_limit_is_said() -> None:
    estimates = estimate_plans(_tiny(), [{}])
    assert estimates.best() == 0 and estimates.best(int(estimates.memory_bytes[0])) == 0
    with pytest.raises(FirstOrderError, match="no plan fits"):
        estimates.best(memory_limit=1)


def test_ring_attention_core_is_max_of_kernel_and_transfer_per_step() -> None:
    # Forward, kernel i waits for kernel i - 1 and block i - 1's transfer: K0 + (cp - 1) K when the transfer X is
    # shorter than both kernels, (cp - 1) X + K when it is longer. Backward, kernel i also waits for kernel i - 1's
    # gradients (from i = 2) and the core for the last kernel's: K0 + (cp - 1) (K + X) for a short transfer.
    local, ring, cp = 1000, 600, 4
    assert ring_core_ps(local, ring, [100] * cp, backward=False) == local + (cp - 1) * ring
    assert ring_core_ps(local, ring, [5000] * cp, backward=False) == (cp - 1) * 5000 + ring
    assert ring_core_ps(local, ring, [100] * cp, backward=True) == local + (cp - 1) * (ring + 100)
    assert ring_core_ps(local, ring, [100], backward=True) == local  # one rank: no ring


@pytest.mark.parametrize("weight", [3, 4])
def test_zb_h1_bubble_is_the_papers_when_w_fits_the_gaps(weight: int) -> None:
    # Qi et al. (ICLR 2024), section 3.1: with free transfers and equal stages, ZB-H1's first stage ends after
    # m (T_F + T_B + T_W) + (pp - 1)(T_F + T_B - T_W) whenever T_W <= min(T_F, T_B); 1F1B's bubble is
    # (pp - 1)(T_F + T_B + T_W).
    forward, backward, pp, m = 5, 4, 4, 8
    passes = [[(forward, backward, weight)]] * pp  # one chunk per stage
    assert stage_ends("zb_h1", m, passes, [0] * (pp - 1))[0] == (
        m * (forward + backward + weight) + (pp - 1) * (forward + backward - weight)
    )
    whole = [[(forward, backward + weight, 0)]] * pp
    assert stage_ends("1f1b", m, whole, [0] * (pp - 1))[0] == (m + pp - 1) * (forward + backward + weight)


@pytest.mark.parametrize(("pp", "v", "m"), [(8, 2, 128), (4, 2, 16), (4, 3, 24), (16, 2, 64)])
def test_interleaved_closed_form_holds_while_a_transfer_fits_under_a_chunk_pass(pp: int, v: int, m: int) -> None:
    # The interleaved steady state hands a chunk's output to the next stage one pass later: up to a transfer of
    # min(F, B) of a chunk the walk pass by pass is the bubble formula exactly, whatever the head; beyond it the
    # receiving stages wait (first_order_plan.transfers_hidden declines such plans). F = 100, B = 150 per chunk.
    head = BlockTimes(PassTime(compute=160), PassTime(compute=310))
    for send, exact in [(0, True), (60, True), (100, True), (102, False), (140, False)]:
        figures = replace(_figures(pp, v, m, 50, 75), head=head, send_ps=(send,) * pp)
        passes = [[(100, 150, 0)] * v for _ in range(pp)]
        passes[-1] = [*passes[-1][:-1], (100 + 160, 150 + 310, 0)]  # the head on the model's last chunk
        walked = max(stage_ends("interleaved", m, passes, [send] * (pp - 1)))
        assert bool(compose([figures])[0][0] == walked) is exact, send
        assert transfers_hidden(figures) is exact
