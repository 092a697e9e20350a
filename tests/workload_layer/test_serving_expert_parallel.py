"""Expert parallelism for serving (``parallelism.ep``): a group of ``ep`` replicas shares each mixture-of-experts
layer's experts, steps in lock-step, and prices its expert part at the group's tokens with the dispatch and combine
all-to-alls run by the system layer on the group's NPUs."""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from contextlib import AbstractContextManager
from typing import Any

import pytest
from pydantic import ValidationError

from stratasim.config.study_file import parse_study
from stratasim.kernel import registry
from stratasim.kernel.serving import IterationShape
from stratasim.study.run import run_study
from stratasim.workload_layer.serving.config import ServingWorkloadConfig
from stratasim.workload_layer.serving.engines import PoolSetup
from stratasim.workload_layer.serving.iteration import iteration_shape
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.simulation import simulate_pools
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload
from tests.workload_layer.serving_pricers import ShapePricer, pool_pricer

US = 10**6  # picoseconds
MODEL = {
    "layers": 4,
    "hidden": 1024,
    "heads": 16,
    "kv_heads": 4,
    "ffn": 2816,
    "vocab": 32000,
    "seq_len": 4096,
    "experts": 8,
    "top_k": 2,
    "activation": "swiglu",
    "bias": False,
    "norm": "rmsnorm",
    "position_embedding": "rope",
    "tie_embeddings": False,
}
DENSE = {key: value for key, value in MODEL.items() if key not in ("experts", "top_k")}
STUDY: dict[str, Any] = {
    "name": "moe-serving",
    "workload": {
        "kind": "serving",
        "model": MODEL,
        "pools": [{"replicas": 4, "parallelism": {"tp": 2}, "scheduler": {"max_batch": 32, "token_budget": 1024}}],
        "requests": {
            "count": 40,
            "seed": 3,
            "arrival": {"process": "poisson", "rate": "200/s"},
            "prompt": {"distribution": "uniform", "low": 100, "high": 900},
            "output": {"distribution": "uniform", "low": 2, "high": 40},
        },
    },
    "system": {"algorithm": "direct"},
    "network": {"topology": [{"kind": "switch", "size": 8, "bandwidth": "100GB/s", "latency": "1us"}]},
    "compute": {"backend": "roofline", "device": "h100"},
}


def study(ep: int | None = None, network: str = "analytical", **requests: Any) -> dict[str, Any]:
    """The small mixture of experts on four TP-2 replicas, with ``parallelism.ep`` when given."""
    data = copy.deepcopy(STUDY)
    if ep is not None:
        data["workload"]["pools"][0]["parallelism"]["ep"] = ep
    data["workload"]["requests"] |= requests
    data["network"]["backend"] = network
    return data


def lone(ep: int) -> dict[str, Any]:
    """One 700-token request a second, five tokens out: no two requests ever meet."""
    return study(
        ep,
        count=6,
        arrival={"process": "fixed", "rate": "1/s"},
        prompt={"distribution": "fixed", "value": 700},
        output={"distribution": "fixed", "value": 5},
    )


def pricer_of(data: dict[str, Any]) -> AbstractContextManager[ShapePricer]:
    """The pricer of ``data``'s pool as its run builds it (its compute backend closed after)."""
    parsed = parse_study(data, "moe.yaml")
    backend = registry.load("network", parsed.network.backend)
    return pool_pricer(parsed, backend(), lambda _: backend())


def serving(data: dict[str, Any]) -> dict[str, float]:
    figures = run_study(parse_study(data, "moe.yaml")).serving
    assert figures is not None
    return figures


def test_ep_1_gives_the_numbers_from_before_expert_parallelism() -> None:
    """Figures of this study at 575bf3e, the commit before ``parallelism.ep``, with the h100 preset refitted on top of
    the optimizer step (issue 26: compute 0.502 to 0.508): unchanged to the picosecond by expert parallelism."""
    for ep in (None, 1):
        figures = serving(study(ep))
        assert (figures["ttft_mean_ps"], figures["tpot_mean_ps"]) == (312_724_356.575, 147_219_278.817518)
        assert (figures["weights_bytes_per_npu"], figures["kv_capacity_bytes_per_npu"]) == (352_929_792, 85_511_763_968)
    assert run_study(parse_study(study(), "moe.yaml")).total_time_ps == 186_806_428_732


def test_a_lone_request_waits_for_its_own_part_and_the_experts_at_its_own_tokens() -> None:
    """With ep = replicas and one request at a time, the three other members run empty batches: TTFT is the
    request's own part (attention, router, TP collectives, no experts) plus the expert part at group tokens =
    member tokens = its 700 (bucketed to 704); TPOT is the mean of the decode steps priced alike at one token."""
    figures = serving(lone(4))
    with pricer_of(lone(4)) as pricer:
        prefill = iteration_shape([(700, 700)], [], 1, 64)
        ttft = pricer(prefill) + pricer.experts(prefill.tokens, prefill.tokens)
        decodes = [pricer(iteration_shape([], [700 + k], 1, 64)) + pricer.experts(1, 1) for k in range(1, 5)]
    assert prefill.tokens == 704
    assert figures["ttft_mean_ps"] == figures["ttft_p99_ps"] == ttft
    assert figures["tpot_mean_ps"] == pytest.approx(sum(decodes) / 4, rel=1e-15)


def test_the_all_to_alls_cost_what_each_member_sends_over_the_network() -> None:
    """Each member sends ``tokens top_k hidden 2`` bytes a layer, ``1 / ep`` of it to each peer; with the direct
    algorithm on the analytical switch each share crosses its own path at once, so one all-to-all takes a share's
    time, ``B / (ep bw)``. Doubling the busiest member from 512 to 1,024 tokens (2 to 4 MiB) adds, over 4 layers'
    dispatch and combine, 8 x 2 MiB / 4 / 100 GB/s = 41.9 us; nothing else in the expert part changes. On the
    congestion-aware network the member's shares queue on its one link: ``B (ep - 1) / (ep bw)``, three times as
    long."""
    extra = 8 * 2 * 2**20 / 4 / 100e9 * 1e12
    with pricer_of(study(4)) as pricer:
        assert pricer.experts(2048, 1024) - pricer.experts(2048, 512) == pytest.approx(extra, rel=1e-9)
    with pricer_of(study(4, network="congestion_aware")) as pricer:
        assert pricer.experts(2048, 1024) - pricer.experts(2048, 512) == pytest.approx(3 * extra, rel=0.01)


def test_a_members_own_part_leaves_the_experts_out() -> None:
    """Without expert parallelism a replica runs all eight experts on its tokens; with ep 4 its own part drops
    them (they are the expert part), so the same shape prices lower by at least the expert GEMMs' weight read:
    4 layers x 8 experts x 3 x 1024 x 2816 / 2 TP ranks x 2 bytes = 277 MB, 93 us at the fitted 0.887 x 3.35 TB/s."""
    shape = IterationShape((), 8, 704, 8)
    with pricer_of(study()) as dense, pricer_of(study(4)) as expert:
        saved = dense(shape) - expert(shape)
    assert isinstance(saved, int) and saved > 4 * 8 * 3 * 1024 * 2816 / 2 * 2 / 3.35e12 * 1e12


def test_each_npu_holds_the_dense_part_and_its_groups_share_of_the_experts() -> None:
    """Per layer on a TP-2 rank (no biases, RMSNorm, RoPE, untied head): QKV 1024 x (1024 + 2 x 4 x 64) / 2 and
    the projection 1024^2 / 2, two norms of 1024, the router 1024 x 8 (replicated) and 8 / ep experts of
    3 x 1024 x 2816 / 2 each; the embedding 32000 x 1024 / 2, the final norm and the head 32000 x 1024 / 2; in
    bf16."""
    for ep in (1, 2, 4):
        layer = (1024 * 1536 + 1024 * 1024) // 2 + 2 * 1024 + 1024 * 8 + 8 // ep * (3 * 1024 * 2816 // 2)
        parameters = 4 * layer + 32000 * 1024 // 2 + 1024 + 32000 * 1024 // 2
        pools = [{"replicas": 4, "parallelism": {"tp": 2, "ep": ep}}]
        config = ServingWorkloadConfig.model_validate(
            {"model": MODEL, "pools": pools, "requests": STUDY["workload"]["requests"]}
        )
        assert ServingRequestsWorkload(config).kv_budget(80 * 10**9).weights == 2 * parameters, ep
    assert serving(lone(4))["weights_bytes_per_npu"] == 2 * (4 * (1310720 + 2048 + 8192 + 2 * 4325376) + 32769024)


def test_a_larger_ep_leaves_more_kv_blocks() -> None:
    blocks = [serving(lone(ep))["kv_blocks_per_replica"] for ep in (1, 2, 4)]
    assert blocks[0] < blocks[1] < blocks[2]


def linear(shape: IterationShape) -> int:
    """100 us an iteration and 1 us a token of a member's own part."""
    return 100 * US + shape.tokens * US


def experts(group_tokens: int, member_tokens: int) -> int:
    """50 us and 0.5 us a group token of experts, 0.25 us a token of the busiest member for the all-to-alls."""
    return 50 * US + group_tokens * US // 2 + member_tokens * US // 4


def test_a_group_steps_in_lock_step_its_slowest_member_setting_the_pace() -> None:
    """Two members, a 512-token and a 16-token prompt arriving together, round robin: both first tokens come at
    max(own parts) + expert part(528 group tokens, 512 the busiest), and every iteration starts on both at once
    (the samples), the idle member running empty batches while the other decodes."""
    config = ServingWorkloadConfig.model_validate(
        {
            "model": MODEL,
            "bucket": 16,
            "requests": STUDY["workload"]["requests"],
            "pools": [{"replicas": 2, "router": "round_robin", "parallelism": {"ep": 2}}],
        }
    )
    requests = [Request(0, 0, 512, 3), Request(1, 0, 16, 6)]
    setup = PoolSetup(
        config.pools[0],
        10_000,
        lambda iteration: linear(iteration.shape),
        experts=lambda work: experts(work.group_tokens, work.member_tokens),
    )
    run = simulate_pools(requests, [setup], config.bucket)
    first = max(linear(iteration_shape([(512, 512)], [], 1, 16)), linear(iteration_shape([(16, 16)], [], 1, 16)))
    first += experts(528, 512)
    assert [sequence.first_token_ps for sequence in run.sequences] == [first, first]
    starts: dict[int, list[int]] = defaultdict(list)
    for sample in run.samples:
        starts[sample.engine].append(sample.time_ps)
    assert starts[0] == starts[1] and len(starts[0]) == 7  # the prefill, five decode steps, then idle
    second = first + max(linear(iteration_shape([], [513], 1, 16)), linear(iteration_shape([], [17], 1, 16)))
    second += experts(2, 1)
    assert run.samples[4].time_ps == run.samples[5].time_ps == second
    assert run.sequences[0].finish_ps == second + linear(iteration_shape([], [514], 1, 16)) + experts(2, 1)
    assert run.iterations == 2 + 2 + 5  # once its request ended, a member runs empty batches, not counted


def test_an_ep_run_is_deterministic() -> None:
    assert serving(study(4)) == serving(study(4))


MESSAGES = [
    (
        {"replicas": 3, "parallelism": {"ep": 2}},
        "workload.pools.0.parallelism.ep (2) must divide workload.pools.0.replicas (3)",
    ),
    (
        {"replicas": 3, "parallelism": {"ep": 3}},
        "workload.model.experts (8) must be divisible by workload.pools.0.parallelism.ep (3)",
    ),
    ({"replicas": 2, "parallelism": {"ep": 2, "pp": 2}}, "workload.pools.0.parallelism.ep (2) needs parallelism.pp 1"),
    (
        {"replicas": 2, "parallelism": {"ep": 2}, "speculative": {"tokens": 3, "acceptance": 0.5, "draft": DENSE}},
        "workload.pools.0.parallelism.ep (2): speculative decoding on an expert-parallel pool is not modelled",
    ),
]


@pytest.mark.parametrize(("pool", "message"), MESSAGES)
def test_bad_expert_parallelism_says_what_is_wrong(pool: dict[str, Any], message: str) -> None:
    data = {"model": MODEL, "pools": [pool], "requests": STUDY["workload"]["requests"]}
    with pytest.raises(ValidationError, match=re.escape(message)):
        ServingWorkloadConfig.model_validate(data)


def test_expert_parallelism_on_a_dense_model_is_refused() -> None:
    data = {
        "model": DENSE,
        "pools": [{"replicas": 2, "parallelism": {"ep": 2}}],
        "requests": STUDY["workload"]["requests"],
    }
    message = "workload.pools.0.parallelism.ep (2) needs a mixture of experts, but workload.model is dense"
    with pytest.raises(ValidationError, match=re.escape(message)):
        ServingWorkloadConfig.model_validate(data)
