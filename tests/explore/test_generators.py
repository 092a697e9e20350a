"""Named generators in a sweep's space: every valid parallelism plan, topology shapes for a chip count."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from stratasim.cli import main
from stratasim.config import load_study
from stratasim.explore import ResultStore, expand, load_sweep, read_results, run_sweep
from stratasim.explore.shapes import factorisations
from stratasim.explore.space import resolve
from stratasim.kernel.errors import ConfigError
from stratasim.study.run import run_study
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.workload import TransformerWorkload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "quickstart.yaml"
GPT3_PLANS = EXAMPLES / "explore" / "gpt3_plans.yaml"
TINY = """
name: tiny
workload:
  kind: transformer
  model: {layers: 4, hidden: 64, heads: 4, seq_len: 32, vocab: 128}
  parallelism: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 16}
system: {algorithm: ring}
network:
  backend: analytical
  topology: [{kind: ring, size: 8, bandwidth: 50GB/s, latency: 500ns}]
compute: {backend: roofline, device: h100}
"""
PLAN = "workload.parallelism."


def _sweep(tmp_path: Path, space: str, base: str = TINY, rest: str = "") -> Path:
    (tmp_path / "base.yaml").write_text(base, encoding="utf-8")
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: base.yaml\nspace:\n{space}{rest}", encoding="utf-8")
    return path


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _expected_plans() -> int:
    """The tiny model's valid plans on 8 NPUs with zero 0 and no recomputation, counted by the rules: heads (4)
    divisible by tp, layers (4) by pp x virtual stages, the global batch (16) by micro-batch x dp; interleaved
    only with pp > 1, v >= 2, and micro-batches per pipeline divisible by pp; sequence parallel on or off when
    tp > 1."""
    count = 0
    for tp in (1, 2, 4):
        for pp in (1, 2, 4):
            if 8 % (tp * pp):
                continue
            dp = 8 // (tp * pp)
            for micro_batch in _divisors(16 // dp):
                per_pipeline = 16 // (micro_batch * dp)
                interleaved = [v for v in (2, 3, 4) if pp > 1 and 4 % (pp * v) == 0 and per_pipeline % pp == 0]
                count += (2 + len(interleaved)) * (2 if tp > 1 else 1)
    return count


NARROW = "  plan: {generator: parallelism, zero: [0], recompute: [none]}\n"


def test_every_valid_plan_and_only_those(tmp_path: Path) -> None:
    space = resolve(load_sweep(_sweep(tmp_path, NARROW)))
    generated = space.generated["plan"]
    assert len(generated.points) == _expected_plans() == 118
    seen = set()
    for point in generated.points:
        plan = {key.removeprefix(PLAN): value for key, value in point.items()}
        tp, pp, dp, v, mb = plan["tp"], plan["pp"], plan["dp"], plan["virtual_stages"], plan["micro_batch"]
        assert tp * pp * dp == 8 and 4 % tp == 0 and 4 % (pp * v) == 0 and 16 % (mb * dp) == 0
        assert (v > 1) == (plan["schedule"] == "interleaved") and (tp > 1 or not plan["sequence_parallel"])
        assert plan["schedule"] != "interleaved" or (16 // (mb * dp)) % pp == 0
        seen.add(tuple(sorted(plan.items())))
    assert len(seen) == len(generated.points)  # no plan twice
    # tp and pp range over the divisors of 8: 6 of the 16 pairs do not multiply to a divisor of 8
    assert generated.skipped["tp * pp does not divide the 8 NPUs"] == 6
    assert generated.skipped["model.heads must be divisible by parallelism.tp"] > 0
    assert not any("fit" in why for why in generated.skipped)  # the tiny model fits an H100 whatever the plan


def test_a_mixture_of_experts_varies_ep_within_dp(tmp_path: Path) -> None:
    moe = TINY.replace("vocab: 128}", "vocab: 128, experts: 4}")
    space = (
        "  plan: {generator: parallelism, tp: [1], zero: [0], recompute: [none], schedule: [1f1b], micro_batch: [1]}\n"
    )
    points = resolve(load_sweep(_sweep(tmp_path, space, moe))).generated["plan"].points
    pairs = sorted((p[PLAN + "pp"], p[PLAN + "dp"], p[PLAN + "ep"]) for p in points)
    # dp = 8 / pp; ep divides dp and the 4 experts; pp divides the 4 layers
    assert pairs == [(1, 8, 1), (1, 8, 2), (1, 8, 4), (2, 4, 1), (2, 4, 2), (2, 4, 4), (4, 2, 1), (4, 2, 2)]


def test_plans_that_do_not_fit_are_pruned_and_counted(tmp_path: Path) -> None:
    everything = resolve(load_sweep(_sweep(tmp_path, NARROW))).generated["plan"].points
    base = TransformerConfig.model_validate(
        {"model": {"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 128}}
    )

    def peak(point: dict[str, object]) -> int:
        plan = {key.removeprefix(PLAN): value for key, value in point.items()}
        config = TransformerConfig.model_validate(
            {"model": base.model.model_dump(exclude_unset=True), "parallelism": {**plan, "global_batch": 16}}
        )
        workload = TransformerWorkload(config)
        return max(workload.stage_memory(stage).total_bytes for stage in range(config.parallelism.pp))

    peaks = sorted(peak(point) for point in everything)
    limit = peaks[len(peaks) // 2]
    fitting = sum(p <= limit for p in peaks)
    narrowed = NARROW.replace("}", f", memory: {limit}B}}")
    generated = resolve(load_sweep(_sweep(tmp_path, narrowed))).generated["plan"]
    assert len(generated.points) == fitting and 0 < fitting < len(everything)
    (why,) = [why for why in generated.skipped if "fit" in why]
    assert generated.skipped[why] == len(everything) - fitting and why.startswith("do not fit in ")
    # without the option, the base study's system.memory_capacity is the limit
    capped = TINY.replace("system: {algorithm: ring}", f"system: {{algorithm: ring, memory_capacity: {limit}B}}")
    assert resolve(load_sweep(_sweep(tmp_path, NARROW, capped))).generated["plan"].points == generated.points


def test_memory_unchecked_without_a_capacity_says_so(tmp_path: Path) -> None:
    base = TINY.replace("compute: {backend: roofline, device: h100}\n", "")
    generated = resolve(load_sweep(_sweep(tmp_path, NARROW, base))).generated["plan"]
    assert len(generated.points) == 118 and "memory not checked" in generated.summary("plan")


def test_the_topology_shapes_of_8_chips(tmp_path: Path) -> None:
    assert factorisations(8, 1) == [(8,)] and factorisations(8, 2) == [(2, 4), (4, 2)]
    assert factorisations(8, 3) == [(2, 2, 2)] and factorisations(8, 2, distinct_orders=False) == [(2, 4)]
    assert factorisations(13, 2) == [] and factorisations(12, 3) == [(2, 2, 3), (2, 3, 2), (3, 2, 2)]
    space = "  shape: {generator: topology, chips: 8, bandwidth: [100GB/s, 50GB/s]}\n"
    points = [p["network.topology"] for p in resolve(load_sweep(_sweep(tmp_path, space))).generated["shape"].points]
    tori = [[d["size"] for d in t] for t in points if isinstance(t, list) and t[0]["kind"] == "ring"]
    assert tori == [[8], [2, 4], [4, 2], [2, 2, 2]]
    assert points[1] == [
        {"kind": "ring", "size": 2, "bandwidth": "100GB/s", "latency": "500ns"},
        {"kind": "ring", "size": 4, "bandwidth": "50GB/s", "latency": "500ns"},
    ]
    assert [t for t in points if isinstance(t, list) and t[0]["kind"] == "switch"] == [
        [{"kind": "switch", "size": 8, "bandwidth": "100GB/s", "latency": "500ns"}]
    ]
    generated = resolve(load_sweep(_sweep(tmp_path, space))).generated["shape"]
    assert generated.skipped == {"meshes with a different link speed per dimension (a mesh has one)": 3}
    alike = "  shape: {generator: topology, chips: [8, 13], dimensions: [2, 3], distinct_orders: false}\n"
    generated = resolve(load_sweep(_sweep(tmp_path, alike))).generated["shape"]
    shapes = [
        t["shape"] if isinstance(t, dict) else [d["size"] for d in t]
        for t in (p["network.topology"] for p in generated.points)
    ]
    assert shapes == [[2, 4], [2, 2, 2], [2, 4], [2, 2, 2], [8], [13]]  # tori, meshes, switches
    assert sum(generated.skipped.values()) == 4  # 13 chips: no 2-D or 3-D torus or mesh


def test_random_topologies_are_connected_and_seeded(tmp_path: Path) -> None:
    space = "  shape: {generator: topology, chips: 8, kinds: [random], random: {count: 4, seed: 3}}\n"
    first, again = (resolve(load_sweep(_sweep(tmp_path, space))).generated["shape"].points for _ in range(2))
    assert first == again and len(first) == 4 and len({repr(p) for p in first}) == 4
    for point in first:
        graph = point["network.topology"]
        links = [(int(chip["id"]), int(link["to"])) for chip in graph["chips"] for link in chip["links"]]
        reached, frontier = {0}, [0]
        while frontier:
            node = frontier.pop()
            for a, b in links:
                for there, other in ((a, b), (b, a)):
                    if there == node and other not in reached:
                        reached.add(other)
                        frontier.append(other)
        assert reached == set(range(8)) and len(links) == 8  # 2 links per chip on average
    other = space.replace("seed: 3", "seed: 4")
    assert resolve(load_sweep(_sweep(tmp_path, other))).generated["shape"].points != first


def test_fill_dp_keeps_the_model_and_batch_on_every_chip_count(tmp_path: Path) -> None:
    # TINY: dp 8, micro-batch 1, global batch 16, so 2 micro-batches per pipeline: dp x 2 must divide 16
    space = "  shape: {generator: topology, chips: [2, 3, 4, 6, 8], kinds: [torus], dimensions: [1], fill_dp: true}\n"
    generated = resolve(load_sweep(_sweep(tmp_path, space))).generated["shape"]
    plans = {
        p["network.topology"][0]["size"]: (p[PLAN + "dp"], p[PLAN + "micro_batch"], p[PLAN + "global_batch"])
        for p in generated.points
    }
    assert plans == {2: (2, 4, 16), 4: (4, 2, 16), 8: (8, 1, 16)}
    assert generated.skipped == {
        "chip counts whose dp does not divide the global batch into the base's micro-batches per pipeline": 2
    }
    tp2 = TINY.replace("tp: 1, pp: 1, dp: 8", "tp: 2, pp: 1, dp: 4")
    generated = resolve(load_sweep(_sweep(tmp_path, space, tp2))).generated["shape"]
    assert [(p[PLAN + "dp"], p[PLAN + "micro_batch"]) for p in generated.points] == [
        (1, 4),
        (2, 2),
        (4, 1),
    ]  # 4 per pipeline
    assert generated.skipped["chip counts not a multiple of the base plan's tp * pp"] == 1  # 3; 6 (dp 3) skips too
    # every point runs on all its chips
    sweep = load_sweep(_sweep(tmp_path, space))
    outcome = run_sweep(sweep, ResultStore(tmp_path / "f.db", sweep.section.model_dump_json()), workers=1)
    assert sorted(r.metrics["npus"] for r in outcome.trials if r.status == "done") == [2, 4, 8]


def test_a_switch_may_have_its_own_speed(tmp_path: Path) -> None:
    space = "  shape: {generator: topology, chips: 4, kinds: [switch, torus], dimensions: [2], switch: {bandwidth: 1GB/s}}\n"
    points = [p["network.topology"] for p in resolve(load_sweep(_sweep(tmp_path, space))).generated["shape"].points]
    assert points == [
        [{"kind": "switch", "size": 4, "bandwidth": "1GB/s", "latency": "500ns"}],
        [{"kind": "ring", "size": 2, "bandwidth": "50GB/s", "latency": "500ns"}] * 2,
    ]


def test_generated_trials_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    space = (
        "  plan: {generator: parallelism, tp: [1, 2], pp: [1, 2], schedule: [1f1b, interleaved], "
        "micro_batch: [1, 2], zero: [0, 1], recompute: [none], sequence_parallel: [false]}\n"
        "  system.algorithm: [ring, direct]\n"
    )
    sweep = load_sweep(_sweep(tmp_path, space))
    trials = expand(sweep)
    # (tp, pp) = (1, 1), (2, 1): 1f1b; (1, 2), (2, 2): 1f1b or interleaved with v = 2; each with 2 micro-batch
    # sizes and 2 ZeRO stages: (1 + 1 + 2 + 2) * 2 * 2 = 24 plans, each with 2 algorithms
    assert len(resolve(sweep).generated["plan"].points) == 24 and len(trials) == 48
    assert set(trials[0]) == {
        PLAN + key
        for key in (
            "tp",
            "pp",
            "dp",
            "schedule",
            "virtual_stages",
            "micro_batch",
            "recompute",
            "zero",
            "sequence_parallel",
        )
    } | {"system.algorithm"}
    outcome = run_sweep(sweep, ResultStore(tmp_path / "s.db", sweep.section.model_dump_json()), workers=1)
    assert all(r.status == "done" for r in outcome.trials), [r.error for r in outcome.trials if r.error][:1]
    assert outcome.notes == (resolve(sweep).generated["plan"].summary("plan"),)
    assert main(["sweep", str(tmp_path / "sweep.yaml"), "--db", str(tmp_path / "s.db")]) == 0
    printed = capsys.readouterr()
    assert "space.plan: 24 plans" in printed.out and "space.plan: 24 plans" in printed.err
    # Read back, a generator's keys are summarised by the values its trials took.
    summary = {s.key: s for s in read_results(tmp_path / "s.db").parameters()}
    assert set(summary) == set(trials[0])
    assert sum(value.trials for value in summary[PLAN + "tp"].values) == 48

    shapes = "  shape: {generator: topology, chips: 8, kinds: [torus, mesh, switch, random], random: {count: 2}}\n"
    path = tmp_path / "shapes.yaml"
    path.write_text(f"base: {QUICKSTART}\nspace:\n{shapes}", encoding="utf-8")
    sweep = load_sweep(path)
    outcome = run_sweep(sweep, ResultStore(tmp_path / "t.db", sweep.section.model_dump_json()))
    assert len(outcome.trials) == 11 and all(r.status == "done" for r in outcome.trials)
    assert all(r.metrics["npus"] == 8 for r in outcome.trials)


def test_random_and_tpe_searches_draw_whole_plans(tmp_path: Path) -> None:
    space = "  plan: {generator: parallelism, zero: [0], recompute: [none], schedule: [1f1b]}\n"
    sweep = load_sweep(_sweep(tmp_path, space, rest="search: {method: random, trials: 5, seed: 2}\n"))
    points = resolve(sweep).generated["plan"].points
    trials = expand(sweep)
    assert len(trials) == 5 and all(trial in points for trial in trials)
    pytest.importorskip("optuna")
    sweep = load_sweep(_sweep(tmp_path, space, rest="search: {method: tpe, trials: 4, seed: 2}\n"))
    first = run_sweep(sweep, ResultStore(tmp_path / "a.db", sweep.section.model_dump_json()))
    assert all(r.params in points and r.status == "done" for r in first.trials)
    resumed = run_sweep(sweep, ResultStore(tmp_path / "a.db", sweep.section.model_dump_json()))
    assert resumed.ran == 0 and resumed.trials == first.trials


def test_orders_map_the_groups_onto_the_dimensions_only_when_asked(tmp_path: Path) -> None:
    """``order`` multiplies each plan by the orders asked (``all``: the six), and the trials run (issue 13: the
    mapping of groups onto dimensions is a feature of a plan)."""
    fixed = "zero: [0], recompute: [none], schedule: [1f1b], micro_batch: [1], sequence_parallel: [false]"
    plain = resolve(load_sweep(_sweep(tmp_path, f"  plan: {{generator: parallelism, tp: [2], pp: [2], {fixed}}}\n")))
    assert len(plain.generated["plan"].points) == 1 and PLAN + "order" not in plain.generated["plan"].points[0]
    every = resolve(
        load_sweep(_sweep(tmp_path, f"  plan: {{generator: parallelism, tp: [2], pp: [2], {fixed}, order: all}}\n"))
    )
    orders = [point[PLAN + "order"] for point in every.generated["plan"].points]
    assert sorted(map(tuple, orders)) == sorted(itertools.permutations(("tp", "pp", "dp")))
    sweep = load_sweep(
        _sweep(
            tmp_path,
            f"  plan: {{generator: parallelism, tp: [2], pp: [2], {fixed}, order: [[tp, pp, dp], [dp, pp, tp]]}}\n",
        )
    )
    outcome = run_sweep(sweep, ResultStore(tmp_path / "o.db", sweep.section.model_dump_json()))
    assert [r.params[PLAN + "order"] for r in outcome.trials] == [["tp", "pp", "dp"], ["dp", "pp", "tp"]]
    assert all(r.status == "done" for r in outcome.trials)


def test_context_parallelism_and_hsdp_only_when_listed(tmp_path: Path) -> None:
    """``cp`` multiplies the plans by the degrees listed (``dp = npus / (tp pp cp)``) and ``hsdp`` by the shard
    groups listed, skipping what the schema refuses; unlisted, neither key appears (the plans are today's)."""
    plain = resolve(load_sweep(_sweep(tmp_path, NARROW))).generated["plan"].points
    listed = resolve(load_sweep(_sweep(tmp_path, NARROW.replace("}", ", cp: [1, 2]}")))).generated["plan"].points
    assert all(PLAN + "cp" not in point for point in plain)
    ones = [{k: v for k, v in point.items() if k != PLAN + "cp"} for point in listed if point[PLAN + "cp"] == 1]
    assert ones == plain
    for point in listed:
        plan = {key.removeprefix(PLAN): value for key, value in point.items()}
        assert plan["tp"] * plan["pp"] * plan["dp"] * plan["cp"] == 8
    assert any(point[PLAN + "cp"] == 2 for point in listed)
    fixed = "tp: [1], pp: [1], cp: [2], zero: [1, 3], hsdp: [2], recompute: [none], schedule: [1f1b], micro_batch: [1]"
    sweep = load_sweep(_sweep(tmp_path, f"  plan: {{generator: parallelism, {fixed}}}\n"))
    generated = resolve(sweep).generated["plan"]
    assert [point[PLAN + "zero"] for point in generated.points] == [3]  # hsdp needs ZeRO-3
    assert sum(generated.skipped.values()) == 1
    outcome = run_sweep(sweep, ResultStore(tmp_path / "cp.db", sweep.section.model_dump_json()))
    assert [r.status for r in outcome.trials] == ["done"]


def test_zero_bubble_and_dualpipe_schedules_only_when_listed(tmp_path: Path) -> None:
    """Listed, zb_h1, zb_h2 and dualpipe come with one chunk per stage and zb_v with a V of two, each only where the
    schema takes it (dualpipe: even pp and at least 2 pp even micro-batches; zb_v: pp > 1, 2 pp micro-batches;
    zb_h2: pp > 1); unlisted, the plans are today's three schedules'."""
    schedules = ("1f1b", "zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipev")
    space = (
        f"  plan: {{generator: parallelism, zero: [0], recompute: [none, full], schedule: [{', '.join(schedules)}]}}\n"
    )
    points = resolve(load_sweep(_sweep(tmp_path, space))).generated["plan"].points
    plans = [{key.removeprefix(PLAN): value for key, value in point.items()} for point in points]
    by_schedule = {name: [p for p in plans if p["schedule"] == name] for name in schedules}
    assert all(by_schedule.values())
    for plan in plans:
        assert plan["virtual_stages"] == (2 if plan["schedule"] in ("zb_v", "dualpipev") else 1)
        per_pipeline = 16 // (plan["micro_batch"] * plan["dp"])
        if plan["schedule"] in ("zb_v", "dualpipev"):
            assert plan["pp"] > 1 and per_pipeline >= 2 * plan["pp"]
        if plan["schedule"] == "dualpipe":
            assert plan["pp"] % 2 == 0 and per_pipeline >= 2 * plan["pp"] and per_pipeline % 2 == 0

    # zb_h1 goes wherever 1f1b does (full recomputation too), zb_h2 wherever 1f1b has more than one stage
    def shapes(name: str) -> set[tuple[tuple[str, object], ...]]:
        return {tuple(sorted((k, v) for k, v in p.items() if k != "schedule")) for p in by_schedule[name]}

    assert shapes("zb_h1") == shapes("1f1b")
    assert shapes("zb_h2") == {plan for plan in shapes("1f1b") if ("pp", 1) not in plan}
    default = resolve(load_sweep(_sweep(tmp_path, NARROW))).generated["plan"].points
    assert {point[PLAN + "schedule"] for point in default} == {"gpipe", "1f1b", "interleaved"}
    sweep = load_sweep(_sweep(tmp_path, space.replace("zero: [0]", "tp: [1], pp: [2], micro_batch: [1], zero: [0]")))
    outcome = run_sweep(sweep, ResultStore(tmp_path / "zb.db", sweep.section.model_dump_json()))
    assert {r.params[PLAN + "schedule"] for r in outcome.trials} == set(schedules)
    assert all(r.status == "done" for r in outcome.trials)


@pytest.mark.parametrize(
    ("space", "problem"),
    [
        ("  plan: {generator: parallelism, tp: [0, 2]}\n", "space.plan.tp[0]: input should be greater than"),
        ("  plan: {generator: parallelism, max_pp: many}\n", "space.plan.max_pp: input should be a valid integer"),
        ("  plan: {generator: parallelism, tpp: [1]}\n", "space.plan.tpp: unknown key; did you mean 'tp'?"),
        ("  plan: {generator: parallelism, schedule: [zigzag]}\n", "space.plan.schedule[0]: input should be"),
        ("  plan: {generator: parallelism, keep: [zero], zero: [1]}\n", "space.plan: keep names zero"),
        ("  plan: {generator: parallelism, ep: [2]}\n", "space.plan.ep: the base study's model has no experts"),
        ("  plan: {generator: parallelism, memory: 1KiB}\n", "space.plan: nothing to try: 0 plans; skipped"),
        ("  plan: {generator: parallelism, memory: lots}\n", "space.plan.memory: "),
        ("  plan: {generator: parallelism, order: [[tp, tp, dp]]}\n", "space.plan: an order lists tp, pp and dp once"),
        ("  plan: {generator: parallelism, order: [[tp, ep, dp]]}\n", "space.plan.order[0][1]: input should be 'tp'"),
        ("  plan: {generator: paralelism}\n", "space.plan: expected a list of values, a range"),
        ("  shape: {generator: topology}\n", "space.shape.chips: required"),
        ("  shape: {generator: topology, chips: [8, 1]}\n", "space.shape.chips[1]: input should be greater"),
        ("  shape: {generator: topology, chips: 8, bandwidth: fast}\n", "space.shape.bandwidth[0]: cannot read 'fast'"),
        ("  shape: {generator: topology, chips: 8, dimensions: [4]}\n", "space.shape.dimensions[0]: input should be"),
        ("  shape: {generator: topology, chips: 8, kinds: [random]}\n", "space.shape: kinds names random exactly"),
        ("  shape: {generator: topology, chips: 8, random: {count: 0}}\n", "space.shape.random.count: input should"),
        (
            "  shape: {generator: topology, chips: 8, switch: {bandwidth: slow}}\n",
            "space.shape.switch.bandwidth: cannot",
        ),
        ("  shape: {generator: topology, chips: 8, fill_dp: maybe}\n", "space.shape.fill_dp: input should be"),
        (
            "  shape: {generator: topology, chips: 8}\n  network.topology: [[]]\n",
            "space.network.topology: sets network.topology, which space.shape sets too",
        ),
    ],
)
def test_a_bad_generator_is_one_error_with_its_dotted_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], space: str, problem: str
) -> None:
    path = _sweep(tmp_path, space)
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err and "Traceback" not in err
    assert err.count("\n  ") == 1  # one problem


def test_a_parallelism_generator_needs_a_transformer(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: {QUICKSTART}\nspace:\n  plan: {{generator: parallelism}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="kind: transformer, not collective") as caught:
        resolve(load_sweep(path))
    assert caught.value.problems == [("space.plan.generator", caught.value.problems[0][1])]


def test_fill_dp_needs_a_transformer(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"base: {QUICKSTART}\nspace:\n  shape: {{generator: topology, chips: 8, fill_dp: true}}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="kind: transformer, not collective") as caught:
        resolve(load_sweep(path))
    assert caught.value.problems[0][0] == "space.shape.fill_dp"


def test_the_gpt3_example_holds_the_plans_its_doc_ranks() -> None:
    """docs/validation/explore-gpt3-plans.md ranks these plans: TP 1 to 8, each simulated one NPU per pipeline stage (TP
    below 8 cuts the node into blocks: stratasim.kernel.grid.block_grid). The whole sweep of 153 plans takes
    minutes on 2 cores, so only its winner and Megatron-LM's published plan run here: 20.69 s and 29.64 s an
    iteration on the a100 preset's fitted model, fused attention."""
    generated = resolve(load_sweep(GPT3_PLANS)).generated["plan"]
    assert len(generated.points) == 153
    assert generated.skipped == {
        "do not fit in 80 GiB": 263,
        "parallelism.schedule: interleaved needs the micro-batches per pipeline to be divisible by parallelism.pp, "
        "as in Megatron-LM": 168,
        "model.layers must be divisible by parallelism.pp * parallelism.virtual_stages": 60,
        "parallelism.global_batch must be divisible by micro_batch * dp": 28,
    }
    published = {
        "tp": 8,
        "pp": 16,
        "dp": 8,
        "schedule": "1f1b",
        "virtual_stages": 1,
        "micro_batch": 1,
        "recompute": "full",
        "zero": 0,
        "sequence_parallel": False,
    }
    assert {PLAN + key: value for key, value in published.items()} in generated.points
    winner = {
        **published,
        "tp": 4,
        "pp": 8,
        "dp": 32,
        "schedule": "interleaved",
        "virtual_stages": 4,
        "recompute": "selective",
        "zero": 1,
    }
    assert {PLAN + key: value for key, value in winner.items()} in generated.points
    seconds, simulated = {}, {}
    for name, plan in (("published", published), ("winner", winner)):
        overrides = [f"{PLAN}{key}={str(value).lower()}" for key, value in plan.items()]
        report = run_study(load_study(EXAMPLES / "gpt3_175b.yaml", overrides)).to_dict()
        seconds[name], simulated[name] = report["total_time_ns"] / 1e9, report["simulated_npus"]
    assert seconds == {"published": pytest.approx(29.637, abs=5e-4), "winner": pytest.approx(20.690, abs=5e-4)}
    assert simulated == {"published": 16, "winner": 8}  # one NPU per pipeline stage
