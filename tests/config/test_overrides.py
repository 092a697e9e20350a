"""``--set`` overrides: dotted keys, list indices both ways, YAML values, and clear problems."""

from __future__ import annotations

from typing import Any

import pytest

from stratasim.config.overrides import apply_overrides, parse_key

DATA: dict[str, Any] = {
    "system": {"splits": 1},
    "network": {"topology": [{"size": 8, "bandwidth": "50GB/s"}, {"size": 4, "bandwidth": "25GB/s"}]},
    "compute": None,
}


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("system.splits", ["system", "splits"]),
        ("network.topology.1.bandwidth", ["network", "topology", "1", "bandwidth"]),
        ("network.topology[1].bandwidth", ["network", "topology", "1", "bandwidth"]),
        ("a[0][2]", ["a", "0", "2"]),
    ],
)
def test_parse_key(key: str, parts: list[str]) -> None:
    assert parse_key(key) == parts


@pytest.mark.parametrize("key", ["", "a..b", "a.", ".a", "a[x]", "[0]", "a[0]b", "a[0"])
def test_parse_key_rejects_malformed(key: str) -> None:
    with pytest.raises(ValueError):
        parse_key(key)


def test_values_are_yaml_and_indices_work_both_ways() -> None:
    result, problems = apply_overrides(
        DATA,
        [
            "network.topology.1.bandwidth=100GB/s",
            "network.topology[0].size=16",
            "system.splits=4",
            "system.algorithm=[ring, direct]",
            "network.spawn=true",
            "compute.device=h100",
            "name=with=equals",
        ],
    )
    assert problems == []
    assert result["network"]["topology"] == [{"size": 16, "bandwidth": "50GB/s"}, {"size": 4, "bandwidth": "100GB/s"}]
    assert result["system"] == {"splits": 4, "algorithm": ["ring", "direct"]}
    assert result["network"]["spawn"] is True and result["compute"] == {"device": "h100"}
    assert result["name"] == "with=equals"
    assert DATA["system"] == {"splits": 1} and DATA["compute"] is None  # the input is not modified


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("network.topology.2.size=4", "index 2 is past the end of network.topology (2 entries)"),
        ("network.topology[9].size=4", "index 9 is past the end"),
        ("system.splits.x=1", "system.splits is a number, not a mapping or list"),
        ("network.topology.size=4", "network.topology is a list"),
        ("system.splits", "expected KEY=VALUE"),
        ("system..splits=1", "empty segment"),
        ("system.splits=[1", "cannot read value"),
    ],
)
def test_problems_name_the_override(override: str, fragment: str) -> None:
    result, problems = apply_overrides(DATA, [override, "system.splits=2"])
    assert len(problems) == 1
    where, message = problems[0]
    assert where == f"--set {override}" and fragment in message
    assert result["system"]["splits"] == 2  # the good override still applies
