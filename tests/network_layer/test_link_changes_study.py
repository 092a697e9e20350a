"""``network.links`` in a study: a degraded link slows exactly the collectives that cross it, a failed torus link
reroutes, a ring cut with no way round fails with one line naming the link and the time, and bad entries get one
named problem each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.config.study_file import load_study, parse_study
from stratasim.kernel.errors import ConfigError
from stratasim.network_layer.flit_level import FlitParameters
from stratasim.study.run import run_study
from tests.helpers import RunCli
from tests.network_layer.test_flit_level import flits
from tests.system_layer.helpers import ser

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
B, ALPHA = 50 * 10**9, 500_000


def test_a_degraded_link_slows_exactly_the_collective_that_crosses_it() -> None:
    # Two 16 MiB ring all-reduces on rows 0 and 2 of a 4 x 4 torus: six steps of 4 MiB each. Intact, each step
    # costs alpha + ser(4 MiB). With npu 1 -> npu 2 at half speed, that link carries row 0's six messages back to
    # back (NPU 1 receives its next chunk from NPU 0 sooner than the slow link frees): 6 ser(4 MiB, B/2) + alpha.
    # Row 2 never crosses it and ends as on the intact torus.
    step = 4 << 20
    degraded = run_study(load_study(EXAMPLES / "degraded_link.yaml"))
    intact = run_study(load_study(EXAMPLES / "degraded_link.yaml", ["network.links=[]"]))
    assert [c.end_ps for c in intact.result.collectives] == [6 * (ALPHA + ser(step, B))] * 2
    assert [c.end_ps for c in degraded.result.collectives] == [
        6 * ser(step, B // 2) + ALPHA,
        6 * (ALPHA + ser(step, B)),
    ]
    busy = {link.link: link.busy_ps for link in degraded.result.links}
    assert busy["npu 1->npu 2"] == 6 * ser(step, B // 2) and busy["npu 9->npu 10"] == 6 * ser(step, B)


def test_a_failed_torus_link_reroutes_and_the_run_finishes_later() -> None:
    failed = run_study(load_study(EXAMPLES / "failed_link.yaml"))
    intact = run_study(load_study(EXAMPLES / "failed_link.yaml", ["network.links=[]"]))
    assert failed.total_time_ps > intact.total_time_ps
    before = {link.link: link.bytes for link in intact.result.links}
    after = {link.link: link.bytes for link in failed.result.links}
    moved = {link: after.get(link, 0) - before.get(link, 0) for link in before.keys() | after.keys()}
    moved = {link: size for link, size in moved.items() if size}
    # The 48 MiB left to cross npu 5 -> npu 6 after 1 ms went 5 -> 1 -> 2 -> 6 instead.
    assert moved == {
        "npu 5->npu 6": -(48 << 20),
        "npu 5->npu 1": 48 << 20,
        "npu 1->npu 2": 48 << 20,
        "npu 2->npu 6": 48 << 20,
    }


def ring_study(tmp_path: Path, links: list[dict[str, Any]], backend: str = "congestion_aware") -> Path:
    study = {
        "name": "ring_cut",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "64MiB"},
        "system": {"algorithm": "ring", "splits": 4},
        "network": {
            "backend": backend,
            "topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "500ns"}],
            "links": links,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["congestion_aware", "flit_level"])
def test_a_ring_cut_in_two_places_fails_with_one_line_naming_the_link_and_the_time(
    tmp_path: Path, run_cli: RunCli, backend: str
) -> None:
    cut = [{"link": f"dim 0: {a}<->{a + 1}", "at": "10us", "fail": True} for a in (1, 5)]
    code, out, err = run_cli("run", str(ring_study(tmp_path, cut, backend)), "--set", "workload.size=1MiB")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == (
        "error: link dim 0: 1->2 failed at 10 us; link dim 0: 6->5 failed at 10 us; NPU 1 cannot reach NPU 2: "
        "the ring is cut both ways round (dimension 0)\n"
    )


def test_one_cut_cable_on_a_ring_sends_the_traffic_the_other_way_round(tmp_path: Path) -> None:
    cut = [{"link": "dim 0: 1<->2", "at": "10us", "fail": True}]
    failed = run_study(load_study(ring_study(tmp_path, cut)))
    intact = run_study(load_study(ring_study(tmp_path, [])))
    assert failed.total_time_ps > intact.total_time_ps
    assert {link.link for link in failed.result.links} >= {"dim 0: 1->0", "dim 0: 1->2"}


def test_the_analytical_network_says_links_of_their_own_speed_break_its_symmetry(tmp_path: Path) -> None:
    slow = [{"link": "dim 0: 3->4", "bandwidth": "25GB/s"}]
    report = run_study(load_study(ring_study(tmp_path, slow, "analytical")))
    aware = run_study(load_study(ring_study(tmp_path, slow)))
    assert report.warnings == (
        "network.links: links of their own speed break the topology's symmetry: every NPU is simulated",
    )
    assert report.result.simulated_npus == 8
    assert report.total_time_ps > run_study(load_study(ring_study(tmp_path, [], "analytical"))).total_time_ps
    assert aware.total_time_ps >= report.total_time_ps


@pytest.mark.parametrize(
    ("entry", "key", "said"),
    [
        ({"link": "dim 0: 3->5", "fail": True}, "network.links[0]", "no link named 'dim 0: 3->5'"),
        ({"link": "npu 3->npu 4", "fail": True}, "network.links[0]", "'dim D: a->b'"),
        ({"link": "dim 0: 3->4", "bandwidth": "0GB/s"}, "network.links[0].bandwidth", "must be positive"),
        ({"link": "dim 0: 3->4", "bandwidth": "-50%"}, "network.links[0].bandwidth", "must be positive"),
        ({"link": "dim 0: 3->4", "bandwidth": "fast"}, "network.links[0].bandwidth", "share of the link's own"),
        ({"link": "dim 0: 3->4", "at": "3 fortnights", "fail": True}, "network.links[0].at", "unknown time unit"),
        ({"link": "dim 0: 3->4", "at": "1ms"}, "network.links[0]", "changes nothing"),
        ({"link": "dim 0: 3->4", "fail": True, "bandwidth": "50%"}, "network.links[0]", "a failed link has no"),
        ({"link": "dim 0: 3->4", "at": "1ms", "latency": "1us"}, "network.links[0]", "only from the start"),
        ({"link": "dim 0: 3->4", "fail": "yes"}, "network.links[0].fail", "boolean"),
    ],
)
def test_a_bad_entry_gets_one_named_problem(tmp_path: Path, entry: dict[str, Any], key: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_study(ring_study(tmp_path, [entry]))
    problems = dict(raised.value.problems)
    assert list(problems) == [key] and said in problems[key], problems


@pytest.mark.parametrize("backend", ["congestion_aware", "flit_level"])
def test_a_cable_that_comes_back_shortens_the_detour(tmp_path: Path, backend: str) -> None:
    def run(links: list[dict[str, Any]]) -> int:
        path = ring_study(tmp_path, links, backend)
        return run_study(load_study(path, ["workload.size=4MiB"])).total_time_ps

    cut = {"link": "dim 0: 1<->2", "at": "10us", "fail": True}
    back = {"link": "dim 0: 1<->2", "at": "40us", "restore": True}
    intact, failed, restored = run([]), run([cut]), run([cut, back])
    assert intact < restored < failed


@pytest.mark.parametrize(
    ("entries", "key", "said"),
    [
        ([{"link": "dim 0: 3->4", "at": "1ms", "restore": True}], "network.links[0]", "is not down before then"),
        (
            [{"link": "dim 0: 3->4", "at": "2ms", "restore": True}, {"link": "dim 0: 3->4", "at": "3ms", "fail": True}],
            "network.links[0]",
            "restores link dim 0: 3->4 at 2 ms, but it is not down before then",
        ),
        (
            [
                {"link": "dim 0: 3->4", "at": "1ms", "fail": True},
                {"link": "dim 0: 3->4", "at": "2ms", "bandwidth": "50%"},
            ],
            "network.links[1]",
            "while it is down (failed at 1 ms); bring it back first with restore: true",
        ),
        ([{"link": "dim 0: 3->4", "restore": "soon"}], "network.links[0].restore", "boolean"),
    ],
)
def test_a_bad_restore_gets_one_named_problem(
    tmp_path: Path, run_cli: RunCli, entries: list[dict[str, Any]], key: str, said: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_study(ring_study(tmp_path, entries))
    problems = dict(raised.value.problems)
    assert list(problems) == [key] and said in problems[key], problems
    code, out, err = run_cli("check", str(ring_study(tmp_path, entries)))
    assert code != 0 and "Traceback" not in err and key in out + err


def test_the_nearest_fabric_link_is_suggested() -> None:
    study = yaml.safe_load((EXAMPLES / "degraded_link.yaml").read_text(encoding="utf-8"))
    study["network"]["links"] = [{"link": "npu 1->npu 22", "bandwidth": "50%"}]
    with pytest.raises(ConfigError, match=r"did you mean 'npu 1->npu 2'"):
        parse_study(study, "study.yaml")


def test_an_upgrade_above_100_percent_is_allowed(tmp_path: Path) -> None:
    faster = run_study(load_study(ring_study(tmp_path, [{"link": "dim 0: 1<->2", "bandwidth": "200%"}])))
    assert faster.total_time_ps <= run_study(load_study(ring_study(tmp_path, []))).total_time_ps


def test_backends_that_do_not_model_links_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the mixed backend does not model links"):
        load_study(ring_study(tmp_path, [{"link": "dim 0: 1->2", "bandwidth": "50%"}], "mixed"))
    with pytest.raises(ConfigError, match="latency: the ns3 backend builds each cable as one ns-3 channel"):
        load_study(ring_study(tmp_path, [{"link": "dim 0: 1->2", "latency": "1us"}], "ns3"))


def test_the_flit_level_network_takes_speeds_and_the_analytical_one_from_the_start_only(tmp_path: Path) -> None:
    """A ring link at half speed (B / 2) carries the ring's 2 (8 - 1) = 14 messages of 1 MiB / 8 back to back, the
    bottleneck: 14 ser(message, B / 2) + alpha on the congestion-aware network, and on the flit-level one 14 F k
    (its F flits of 64 B each, k = 64 B / (B / 2)) within 3 % (the routers' pipelines and the last message's way);
    the analytical network refuses a change at a time by name."""
    half = [{"link": "dim 0: 1->2", "bandwidth": "50%"}]
    message = 2**20 // 8
    congestion, flit = (
        run_study(load_study(ring_study(tmp_path, half, backend), ["workload.size=1MiB", "system.splits=1"]))
        for backend in ("congestion_aware", "flit_level")
    )
    assert congestion.total_time_ps == 14 * ser(message, B // 2) + ALPHA
    assert abs(flit.total_time_ps / (14 * flits(message) * ser(FlitParameters().flit_bytes, B // 2)) - 1) < 0.03
    with pytest.raises(ConfigError) as raised:
        load_study(ring_study(tmp_path, [{"link": "dim 0: 1->2", "at": "1us", "bandwidth": "50%"}], "analytical"))
    assert dict(raised.value.problems) == {
        "network.links[0]": "the analytical network prices links from the start only; failures and changes at a time "
        "need backend congestion_aware or flit_level"
    }


def test_a_spawned_network_gives_the_same_reroute() -> None:
    local = run_study(load_study(EXAMPLES / "failed_link.yaml"))
    spawned = run_study(load_study(EXAMPLES / "failed_link.yaml", ["network.spawn=true"]))
    assert spawned.total_time_ps == local.total_time_ps
    assert spawned.result.links == local.result.links
