"""The ``goodput:`` section of a training study: failure rates, checkpoint and restart of a long run.

Its figures come from the pure model :mod:`stratasim.report.goodput`; the defaults and their sources are in
docs/how-to/goodput.md. Durations here are long (a component's MTBF is years), so they are read in seconds from
``s``, ``min``, ``h`` or ``d``, not in the picoseconds of the simulation.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field, StrictInt, WithJsonSchema, model_validator

from stratasim.kernel.contracts import CheckpointWriters
from stratasim.kernel.schema import QUANTITY_FORMS, QUANTITY_KEY, Bandwidth, Bytes, Section, quantity, written

__all__ = ["GoodputSection", "CheckpointOptions", "FailureRates"]

_SECONDS = {"s": 1, "min": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(?P<num>[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?)\s*(?P<unit>[a-z]+)\s*$")


def _seconds(value: object) -> object:
    """Read a positive duration written with a unit (``10min``, ``86331h``) as seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a duration such as 10min or 5000h, got {value!r}")
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None or match["unit"] not in _SECONDS:
        raise ValueError(f"cannot read {value!r} as a positive duration; write it like 10min, 5000h or 30d")
    seconds = float(match["num"]) * _SECONDS[match["unit"]]
    if seconds <= 0:
        raise ValueError(f"a duration here must be positive, got {value!r}")
    return seconds


Seconds = Annotated[
    float,
    BeforeValidator(_seconds),
    quantity("positive duration in s, min, h or d", "10min"),
    written("s"),
]
"""A positive duration in seconds (accepts ``600s``, ``10min``, ``86331h``, ``30d``)."""


def _interval(value: object) -> object:
    """Read a checkpoint interval: ``auto``, a whole number of steps (at least 1), or a duration in seconds."""
    if value == "auto":
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"a checkpoint interval of {value} steps: give at least 1 step, a duration or auto")
        return value
    return _seconds(value)


Interval = Annotated[
    str | int | float,
    BeforeValidator(_interval),
    WithJsonSchema(
        {
            "anyOf": [
                {"const": "auto"},
                {"type": "integer", "minimum": 1},
                {**QUANTITY_FORMS[0], QUANTITY_KEY: "positive duration in s, min, h or d, e.g. 30min"},
            ]
        }
    ),
]
"""``auto``, a number of steps (an int) or a duration in seconds (a float)."""


class FailureRates(Section):
    """``goodput.mtbf``: the mean time between failures of one component of each kind. The defaults spread the
    419 unexpected interruptions Meta's Llama 3 training saw in 54 days on 16,384 H100s (2,048 nodes of 8) over
    its GPUs (58.7 % of them, the GPU share the paper reports) and its nodes (the rest: host, network, software)."""

    npu: Seconds = 86331 * 3600.0
    """One NPU's MTBF (default 86331h, about 9.9 years: the GPU failures of Llama 3's run)."""
    node: Seconds = 15338 * 3600.0
    """One node's MTBF, for what fails per node besides its NPUs (default 15338h: the other failures of Llama 3's
    run)."""
    link: Seconds | None = None
    """One link's MTBF (a cable of the study's topology, counted from it); unset, link failures are part of the
    nodes' share, as in the defaults."""
    switch: Seconds | None = None
    """One switch's MTBF (a switch or router of the study's topology, counted from it); unset, switch failures are
    part of the nodes' share, as in the defaults."""


class CheckpointOptions(Section):
    """``goodput.checkpoint``: what a checkpoint costs and how often it is written."""

    bandwidth: Bandwidth = 7e12 / 16384
    """The rate at which each NPU writes its share of a checkpoint, all NPUs at once (default 427.2MB/s: the 7 TB/s
    peak of the storage Llama 3's 16,384 GPUs wrote to, shared among them)."""
    node_bandwidth: Bandwidth | None = None
    """The rate at which one node writes its NPUs' shares together, all nodes at once (``npus_per_node`` NPUs a
    node); instead of ``bandwidth``, when storage is reached per node."""
    size: Bytes | None = None
    """The bytes each NPU writes per checkpoint (default: derived from the workload, as ``writers`` says)."""
    writers: CheckpointWriters = "every_rank"
    """Who writes the weights and optimizer state, when ``size`` is not given: ``every_rank`` (each NPU what it
    holds, data-parallel replicas too: an upper bound), ``one_per_shard`` (each model shard, one TP rank of a
    pipeline stage, once, by its first data-parallel rank) or ``spread`` (each shard once, split evenly over its
    data-parallel ranks)."""

    @model_validator(mode="after")
    def _one_bandwidth(self) -> CheckpointOptions:
        if self.node_bandwidth is not None and "bandwidth" in self.model_fields_set:
            raise ValueError("give bandwidth (per NPU) or node_bandwidth (per node), not both")
        return self

    interval: Interval = "auto"
    """Work between checkpoints: ``auto`` (Daly's optimum, rounded to whole steps), a number of steps, or a
    duration (at least one step)."""


class GoodputSection(Section):
    """``goodput:`` — the expected useful fraction of a long training run's wall time when its components fail,
    and its best checkpoint interval, from the simulated step time (a training workload only)."""

    mtbf: FailureRates = FailureRates()
    """Each component kind's mean time between failures."""
    npus_per_node: StrictInt = Field(8, ge=1)
    """NPUs in one node: the job has ceil(NPUs / npus_per_node) nodes."""
    checkpoint: CheckpointOptions = CheckpointOptions()
    """The checkpoint's cost and interval."""
    restart: Seconds = 600.0
    """The time from a failure to training again, from the last checkpoint (default 10min)."""
