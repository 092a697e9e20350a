"""Skewed mixture-of-experts routing (``workload.model.routing``): Zipf shares, routing traces, contiguous and
EPLB placement, capacity drops and the busiest rank's experts in training, the busiest member's experts and the
uneven all-to-alls in serving. Every figure is checked against its hand calculation."""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from stratasim.config import load_study
from stratasim.config.study_file import parse_study
from stratasim.kernel.collective_types import uneven_all_to_all_bytes
from stratasim.kernel.errors import InputError, StrataSimError
from stratasim.kernel.operator_shapes import shape_of
from stratasim.study.run import run_study
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.transformer.expert_placement import eplb_replicas, place
from stratasim.workload_layer.transformer.moe import routing
from stratasim.workload_layer.transformer.routing import uniform_shares, zipf_shares
from stratasim.workload_layer.transformer.routing_trace import read_routing_trace
from tests.examples.test_studies import HEADLINES, headline_figures
from tests.helpers import RunCli
from tests.workload_layer.test_serving_expert_parallel import pricer_of, serving, study
from tests.workload_layer.transformer_helpers import GPT, all_graphs, build, collectives, run

MOE = {**GPT, "experts": 4, "top_k": 2, "capacity_factor": 1.25}
HALF, QUARTER, EIGHTH = Fraction(1, 2), Fraction(1, 4), Fraction(1, 8)


def test_zipf_shares_follow_k_to_the_minus_s_and_s_0_is_uniform() -> None:
    assert zipf_shares(8, 0.0, 3, 5) == uniform_shares(8) == (Fraction(1, 8),) * 8
    # s = 1 over 4 experts: weights 1, 1/2, 1/3, 1/4 of their sum 25/12, shuffled per layer.
    shares = zipf_shares(4, 1.0, 0, 0)
    assert sum(shares) == 1
    assert sorted(map(float, shares), reverse=True) == pytest.approx([12 / 25, 6 / 25, 4 / 25, 3 / 25], rel=1e-11)
    assert zipf_shares(4, 1.0, 0, 0) == shares  # seeded
    assert {zipf_shares(16, 1.0, 0, layer) for layer in range(4)} != {shares}  # each layer its own hot experts


def test_contiguous_placement_and_the_busiest_rank() -> None:
    """Experts 0-1 on rank 0, 2-3 on rank 1: rank 0 takes 1/2 + 1/4 of the assignments."""
    layer = place((HALF, QUARTER, EIGHTH, EIGHTH), 2, 0)
    assert layer.ranks == ((HALF, QUARTER), (EIGHTH, EIGHTH))
    assert layer.rank_shares == (Fraction(3, 4), Fraction(1, 4))
    assert layer.busiest(100) == (50, 25)
    assert place(uniform_shares(8), 4, 0).rank_shares == (Fraction(1, 4),) * 4


def test_eplb_replicates_the_hottest_and_packs_the_least_loaded_rank() -> None:
    """Shares 1/2, 1/5, 1/5, 1/10 on 2 ranks with 2 redundant experts: expert 0 (1/2, then 1/4 a replica, above
    1/5) takes both, 1/6 a replica; the six physical experts, heaviest first, go to the lighter open rank:
    1/5 -> 0, 1/5 -> 1, 1/6 -> 0, 1/6 -> 1, 1/6 -> 0 (a tie), 1/10 -> 1: ranks 8/15 and 7/15, against 7/10 and
    3/10 placed contiguously."""
    shares = (HALF, Fraction(1, 5), Fraction(1, 5), Fraction(1, 10))
    assert eplb_replicas(shares, 2) == (3, 1, 1, 1)
    assert place(shares, 2, 2).rank_shares == (Fraction(8, 15), Fraction(7, 15))
    assert place(shares, 2, 0).rank_shares == (Fraction(7, 10), Fraction(3, 10))


def test_capacity_drops_and_the_busiest_ranks_experts_in_training() -> None:
    """T = 128 tokens, top-2, 4 experts, C = ceil(1.25 x 256 / 4) = 80; shares 1/2, 1/4, 1/8, 1/8 want 128, 64,
    32 and 32 slots: expert 0 drops 48. Unpadded, rank 0's experts take 80 and 64 from each of the 2 ranks
    (160 and 128 tokens) and the all-to-all buffer is 2 x 144 slots (each peer message the busiest rank's 144);
    padded every expert computes its 80 from each rank, the buffer E C = 320 as without routing."""
    layer = place((HALF, QUARTER, EIGHTH, EIGHTH), 2, 0)
    unpadded = routing(128, 4, 2, 1.25, 2, 1, layer, pad=False)
    assert (unpadded.capacity, unpadded.dropped_tokens) == (80, 48)
    assert (unpadded.expert_tokens, unpadded.dispatched_tokens, unpadded.groups) == (
        (160, 128),
        288,
        ((160, 1), (128, 1)),
    )
    padded = routing(128, 4, 2, 1.25, 2, 1, layer)
    assert (padded.expert_tokens, padded.dispatched_tokens, padded.dropped_tokens) == ((160, 160), 320, 48)
    even = routing(128, 4, 2, 1.25, 2, 1)
    assert (even.expert_tokens, even.dispatched_tokens, even.dropped_tokens) == ((160, 160), 320, 0)


def test_uneven_all_to_all_is_the_even_one_at_the_busiest_peers_share() -> None:
    assert uneven_all_to_all_bytes(1000, ()) == 1000
    assert uneven_all_to_all_bytes(1000, (Fraction(1, 3),) * 3) == 1000  # even: bit for bit
    assert uneven_all_to_all_bytes(1000, (HALF, QUARTER, QUARTER)) == 1500  # 3 messages of 500


def routed(model: dict[str, Any], **keys: Any) -> dict[str, Any]:
    return {**model, "routing": keys}


def test_uniform_routing_keeps_every_training_figure() -> None:
    """s = 0 (padded or not: C is the even share at capacity factor 1) builds the graphs of a study without the key."""
    plain = {**MOE, "capacity_factor": 1.0}
    before = all_graphs(build(plain, dp=2, ep=2))
    for keys in ({"skew": "zipf", "s": 0}, {"skew": "zipf", "pad_to_capacity": False}):
        assert all_graphs(build(routed(plain, **keys), dp=2, ep=2)) == before
    padded = all_graphs(build(routed(MOE, skew="zipf", s=1.5), dp=2, ep=2))[0]
    even = all_graphs(build(MOE, dp=2, ep=2))[0]
    assert [n.comm_bytes for n in collectives(padded)] == [n.comm_bytes for n in collectives(even)]


def test_skewed_training_runs_the_busiest_ranks_experts_and_its_all_to_all() -> None:
    """At s = 16 one expert of 4 takes (nearly) all of a layer's 2 x 128 assignments: it wants 256 slots, its 3
    peers 1 each. With capacity factor 4 (C = 256) nothing drops: unpadded, the hot expert's rank computes 2 x 256
    tokens (both ranks') and 2 x 1, and each all-to-all message is that rank's 257 slots, a buffer of 2 x 257 x h
    elements of 2 bytes. Routed evenly each expert would compute 2 x 64: the step takes longer."""
    model = {**MOE, "capacity_factor": 4.0}
    workload = build(routed(model, skew="zipf", s=16.0, pad_to_capacity=False), dp=2, ep=2)
    even = build(routed(model, skew="zipf", s=0, pad_to_capacity=False), dp=2, ep=2)
    shares = zipf_shares(4, 16.0, 0, 0)
    r = routing(128, 4, 2, 4.0, 2, 1, place(shares, 2, 0), pad=False)
    assert (sorted(r.expert_tokens), r.dropped_tokens, r.dispatched_tokens) == ([2, 512], 0, 2 * 257)
    graph = all_graphs(workload)[0]
    ups = [list(shape_of(n.op).dims()) for n in graph.nodes if n.name.startswith("mb0 layer0 fwd expert up")]
    assert ups == [[512, 256, 1024], [2, 256, 1024]]  # two experts of one token count each: batch 1
    assert collectives(graph, "mb0 layer0 fwd moe dispatch")[0].comm_bytes == 2 * 257 * 256 * 2
    even_ups = [list(shape_of(n.op).dims()) for n in all_graphs(even)[0].nodes if n.name == "mb0 layer0 fwd expert up"]
    assert even_ups == [[2, 128, 256, 1024]]
    assert run(workload).total_time_ps > run(even).total_time_ps


def test_full_experts_drop_what_they_cannot_take() -> None:
    """The same skew at capacity factor 1.25 (C = 80): the hot expert drops 256 - 80 = 176 of each layer's
    assignments on each rank (the others take their 1 each); the report counts them over 4 layers and 2 DP ranks."""
    workload = build(routed(MOE, skew="zipf", s=16.0, pad_to_capacity=False), dp=2, ep=2)
    layers = [routing(128, 4, 2, 1.25, 2, 1, place(zipf_shares(4, 16.0, 0, k), 2, 0), pad=False) for k in range(4)]
    assert [r.dropped_tokens for r in layers] == [176] * 4
    assert workload.dropped_assignments() == (2 * 4 * 176, 2 * 4 * 256)


def test_serving_s_0_and_no_key_give_the_same_figures() -> None:
    plain = serving(study(4))
    data = study(4)
    data["workload"]["model"]["routing"] = {"skew": "zipf", "s": 0}
    assert serving(data) == plain


def skewed(ep: int, shares: str, tmp_path: Path) -> dict[str, Any]:
    """The small MoE serving study routed by a trace giving every one of its 4 layers ``shares``."""
    trace = tmp_path / "routing.csv"
    rows = [f"{layer},{expert},{share}" for layer in range(4) for expert, share in enumerate(shares.split())]
    trace.write_text("layer,expert,tokens\n" + "\n".join(rows) + "\n", encoding="utf-8")
    data = copy.deepcopy(study(ep))
    data["workload"]["model"]["routing"] = {"trace": str(trace)}
    return data


def test_the_busiest_member_sets_the_pace_of_the_expert_part(tmp_path: Path) -> None:
    """Every token to experts 0 and 1, both on member 0 of 4: member 0's two experts each take T tokens of the
    group's T (2T assignments) where routed evenly each takes 2T / 8 = T / 4, and every member sends its whole
    buffer to member 0 (an all-to-all-v whose one message is 4 times an even share). So the expert part at T
    group and M member tokens is exactly the even one at 4T and 4M."""
    with pricer_of(skewed(4, "1 1 0 0 0 0 0 0", tmp_path)) as hot, pricer_of(study(4)) as even:
        for group, member in ((64, 16), (704, 704), (1024, 512)):
            assert hot.experts(group, member) == even.experts(4 * group, 4 * member)
            assert hot.experts(group, member) > even.experts(group, member)


def test_eplb_recovers_part_of_the_skew(tmp_path: Path) -> None:
    """Shares 4, 2, 1, 1, 0, 0, 0, 0 (of 8) on 2 members: contiguously member 0 takes every assignment. With 2
    redundant experts EPLB gives expert 0 three replicas (1/2, then 1/4 a replica, tied with expert 1's 1/4 and
    first) of 1/6 each and packs 1/4, 1/6, 1/6, 1/6, 1/8, 1/8 heaviest first onto the lighter open member: 13/24
    and 11/24. The expert part shrinks, though not to the even routing's."""
    shares = "4 2 1 1 0 0 0 0"
    data = skewed(2, shares, tmp_path)
    data_eplb = copy.deepcopy(data)
    data_eplb["workload"]["model"]["routing"]["redundant_experts"] = 2
    layer = place(tuple(Fraction(int(s), 8) for s in shares.split()), 2, 2)
    assert layer.rank_shares == (Fraction(13, 24), Fraction(11, 24))
    with pricer_of(data) as hot, pricer_of(data_eplb) as eplb, pricer_of(study(2)) as even:
        assert even.experts(1024, 256) < eplb.experts(1024, 256) < hot.experts(1024, 256)


BAD_TRACES = [
    ("layer,expert,tokens\n0,8,5\n", "line 2: expert 8 does not exist: the model has 8 (0 to 7)"),
    ("layer,expert,tokens\n0,1,-5\n", "line 2: tokens: a count cannot be negative"),
    ("layer,expert,tokens\n0,1,5\n", "layer 1 is missing: the trace must give all 4 mixture-of-experts layers"),
    ("layer,expert,tokens\n" + "".join(f"{k},0,1\n" for k in range(5)), "line 6: layer 4 does not exist"),
    ("layer,expert,tokens\n0,1,5\n0,1,6\n", "line 3: layer 0, expert 1 is given twice"),
    ("layer,expert\n0,1\n", "line 1: expected the header layer,expert,tokens"),
    ("layer,expert,tokens\n0,x,5\n", "line 2: expert: expected a whole number from 0"),
    ("layer,expert,tokens\n0,1,lots\n", "line 2: tokens: expected a number of tokens"),
    ("layer,expert,tokens\n" + "".join(f"{k},0,0\n" for k in range(4)), "layer 0 routes no tokens"),
]


@pytest.mark.parametrize(("text", "message"), BAD_TRACES)
def test_a_bad_routing_trace_is_one_message_naming_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    trace = tmp_path / "routing.csv"
    trace.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        read_routing_trace(str(trace), 4, 8)
    assert str(caught.value).startswith(str(trace))


def test_a_routing_trace_reads_counts_or_shares(tmp_path: Path) -> None:
    """Only the ratios matter; an expert left out takes nothing; comments and blank lines are skipped."""
    trace = tmp_path / "routing.csv"
    trace.write_text("# measured\nlayer,expert,tokens\n0,0,1.5\n\n0,1,0.25\n0,3,.25\n1,2,7\n", encoding="utf-8")
    assert read_routing_trace(str(trace), 2, 4) == (
        (Fraction(3, 4), Fraction(1, 8), Fraction(0), Fraction(1, 8)),
        (Fraction(0), Fraction(0), Fraction(1), Fraction(0)),
    )


def test_a_bad_routing_trace_fails_the_cli_cleanly(tmp_path: Path, run_cli: RunCli) -> None:
    data = skewed(4, "1 1 0 0 0 0 0 0 9", tmp_path)  # a ninth expert
    study_file = tmp_path / "moe.yaml"
    study_file.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, _, err = run_cli("run", str(study_file))
    assert code != 0 and "Traceback" not in err
    assert "routing.csv: line 10: expert 8 does not exist" in err


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({}, "give one of routing.skew (zipf) or routing.trace (a CSV file)"),
        ({"skew": "zipf", "trace": "t.csv"}, "give one of routing.skew"),
        ({"trace": "t.csv", "s": 1}, "routing.s applies to routing.skew only"),
        ({"skew": "zipf", "s": -1}, "s"),
        ({"skew": "zipf", "redundant_experts": 3}, "redundant_experts (3) must be divisible by parallelism.ep (2)"),
        ({"skew": "pareto"}, "skew"),
    ],
)
def test_bad_routing_keys_name_the_key(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(routed(MOE, **keys), dp=2, ep=2)


def test_routing_on_a_dense_model_is_refused() -> None:
    with pytest.raises(ValidationError, match="model.routing applies to a mixture of experts only"):
        build(routed(GPT, skew="zipf"))


def test_serving_redundant_experts_must_fill_every_member() -> None:
    data = study(4)
    data["workload"]["model"]["routing"] = {"skew": "zipf", "s": 1, "redundant_experts": 2}
    with pytest.raises(StrataSimError, match=r"routing.redundant_experts \(8 \+ 2\) must be divisible"):
        run_study(parse_study(data, "moe.yaml"))


def test_all_to_all_v_nodes_stay_all_to_alls() -> None:
    graph = all_graphs(build(routed(MOE, skew="zipf", s=1.0, pad_to_capacity=False), dp=2, ep=2))[0]
    assert {n.comm_type for n in collectives(graph, "moe")} == {workload_pb2.ALL_TO_ALL}


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_examples_routed_evenly_give_todays_figures_to_the_picosecond() -> None:
    """The serving example at s = 0 without redundant experts is the EP-8 example (its pinned headline figures);
    the training example at s = 0, padded, is the same study without the key."""
    even = ["workload.requests.count=400", "workload.model.routing.s=0", "workload.model.routing.redundant_experts=0"]
    skew = run_study(load_study(EXAMPLES / "serving" / "mixtral_8x7b_h100_ep8_skew.yaml", even))
    names = set(HEADLINES["serving/mixtral_8x7b_h100_ep8.yaml"])
    assert headline_figures(skew, names) == HEADLINES["serving/mixtral_8x7b_h100_ep8.yaml"]
    data = yaml.safe_load((EXAMPLES / "moe_training_skew.yaml").read_text(encoding="utf-8"))
    data["workload"]["model"]["routing"] |= {"s": 0, "pad_to_capacity": True}
    routed_evenly = run_study(parse_study(copy.deepcopy(data), "t.yaml"))
    del data["workload"]["model"]["routing"]
    today = run_study(parse_study(data, "t.yaml"))
    assert routed_evenly.total_time_ps == today.total_time_ps
    assert routed_evenly.to_dict()["compute_energy_pj"] == today.to_dict()["compute_energy_pj"]
