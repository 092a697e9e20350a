"""``{generator: parallelism}``: every valid parallelism plan of the base study's transformer for its NPU count.

A plan sets ``workload.parallelism``'s ``tp``, ``pp`` and ``dp`` (``dp = npus / (tp pp)``, the plan filling the
topology as the transformer requires), ``ep`` for a mixture of experts, ``schedule`` with ``virtual_stages``,
``micro_batch``, ``recompute``, ``zero`` and ``sequence_parallel``; the global batch and every other key stay the
base study's. By default each varies over every value that can make sense:

- ``tp`` and ``pp`` every divisor of the NPU count (at most ``max_tp`` / ``max_pp``), ``ep`` every divisor of dp;
- ``schedule`` gpipe and 1f1b, and with more than one stage interleaved with every ``virtual_stages`` from 2 that
  divides the stage's layers; the zero-bubble schedules ``zb_h1``, ``zb_h2`` (more than one stage) and ``zb_v``
  (two chunks per stage), ``dualpipe`` and ``dualpipev`` (two chunks) only when listed (``schedule: [1f1b, zb_h1,
  zb_v, dualpipe]``), each with the shape it needs;
- ``micro_batch`` every divisor of a DP rank's share of the global batch (at most ``max_micro_batch``);
- ``recompute`` none, selective and full; ``zero`` 0 to 3; ``sequence_parallel`` off and, with ``tp > 1``, on;
- ``order`` (how the groups map onto the topology's dimensions, innermost first) only when asked: a list of
  orders, or ``all`` for the six, else the base study's;
- ``cp`` (context parallelism, ``dp = npus / (tp pp cp)``) and ``hsdp`` (ZeRO-3's shard groups) only when listed,
  else the base study's: ``cp: [1, 2, 4]``, ``hsdp: [1, 8]``.

A list option (``tp: [1, 2, 4, 8]``, ``schedule: [1f1b]``...) narrows a feature to those values; ``keep:`` names
features taken from the base study instead. Each combination is then validated by the transformer's own schema
(heads, key-value heads, FFN and sequence divisible by tp, layers by pp x virtual stages, the global batch by
micro-batch x dp, ...): one that breaks a rule is skipped under that rule. A valid plan whose peak memory per
NPU — the builder's own accounting, :meth:`TransformerWorkload.stage_memory` — exceeds ``memory`` (default: the
base study's ``system.memory_capacity``, else its compute device's capacity) is skipped as not fitting.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from stratasim.explore.generators import Generated, Generator, GeneratorError, Size, divisors, reason
from stratasim.kernel.schema import Bytes
from stratasim.kernel.units import format_bytes
from stratasim.study.device import study_memory_capacity
from stratasim.workload_layer.transformer.config import TransformerConfig
from stratasim.workload_layer.transformer.workload import TransformerWorkload

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["ParallelismGenerator"]

_PLAN = "workload.parallelism."
Degree = Annotated[int, Field(ge=1)]
Feature = Literal["ep", "schedule", "micro_batch", "recompute", "zero", "sequence_parallel"]
Axis = Literal["tp", "pp", "dp"]
_PAIRS = 10**6  # (tp, pp) pairs counted one by one, at most: about a second
_ORDERS = [list(order) for order in itertools.permutations(("tp", "pp", "dp"))]


class ParallelismGenerator(Generator):
    """``generator: parallelism`` and its options (the module docstring says what each narrows)."""

    model_config = ConfigDict(title="generator: parallelism")

    generator: Literal["parallelism"]
    """parallelism: every valid parallelism plan of the base study's transformer."""
    tp: list[Degree] | None = Field(default=None, min_length=1)
    """Tensor-parallel degrees to try (default: every divisor of the NPU count)."""
    pp: list[Degree] | None = Field(default=None, min_length=1)
    """Pipeline-parallel degrees to try (default: every divisor of the NPU count)."""
    ep: list[Degree] | None = Field(default=None, min_length=1)
    """Expert-parallel degrees to try, for a mixture of experts (default: every divisor of dp)."""
    max_tp: Degree | None = None
    """The largest tensor-parallel degree tried."""
    max_pp: Degree | None = None
    """The largest pipeline-parallel degree tried."""
    schedule: (
        list[Literal["gpipe", "1f1b", "interleaved", "zb_h1", "zb_h2", "zb_v", "dualpipe", "dualpipev"]] | None
    ) = Field(default=None, min_length=1)
    """Pipeline schedules to try (default gpipe, 1f1b and interleaved; zb_h1, zb_h2, zb_v, dualpipe, dualpipev when
    listed)."""
    virtual_stages: list[Annotated[int, Field(ge=2)]] | None = Field(default=None, min_length=1)
    """Virtual stages of the interleaved schedule (default: every count from 2 dividing a stage's layers)."""
    micro_batch: list[Degree] | None = Field(default=None, min_length=1)
    """Micro-batch sizes to try (default: every divisor of a DP rank's share of the global batch)."""
    max_micro_batch: Degree | None = None
    """The largest micro-batch tried."""
    recompute: list[Literal["none", "selective", "full"]] | None = Field(default=None, min_length=1)
    """Activation recomputation modes to try (default all three)."""
    zero: list[Literal[0, 1, 2, 3]] | None = Field(default=None, min_length=1)
    """ZeRO stages to try (default 0 to 3)."""
    sequence_parallel: list[bool] | None = Field(default=None, min_length=1)
    """Sequence parallelism off and/or on (on only with tp above 1)."""
    cp: list[Degree] | None = Field(default=None, min_length=1)
    """Context-parallel degrees to try (default: the base study's)."""
    hsdp: list[Degree] | None = Field(default=None, min_length=1)
    """HSDP shard-group sizes to try, with ZeRO-3 (default: the base study's)."""
    order: Annotated[list[list[Axis]] | None, BeforeValidator(lambda value: _ORDERS if value == "all" else value)] = (
        None
    )
    """How the groups map onto the topology's dimensions, innermost first: a list of orders, or all (default: the base study's)."""
    keep: list[Feature] = Field(default_factory=list)
    """Features taken from the base study rather than varied."""
    memory: Bytes | None = Field(default=None, gt=0)
    """The memory per NPU a plan must fit (default: the base study's capacity)."""

    @model_validator(mode="after")
    def _kept_or_listed(self) -> ParallelismGenerator:
        both = [name for name in self.keep if getattr(self, name) is not None]
        if both:
            raise ValueError(f"keep names {both[0]}, which also lists values: keep it or list them, not both")
        if self.virtual_stages is not None and "schedule" in self.keep:
            raise ValueError("virtual_stages go with the interleaved schedule, which keep: [schedule] leaves out")
        for order in self.order or []:
            if sorted(order) != ["dp", "pp", "tp"]:
                raise ValueError(f"an order lists tp, pp and dp once each, innermost first; got {order}")
        if self.order is not None and not self.order:
            raise ValueError("order: list at least one order, or all")
        return self

    def generate(self, study: Study) -> Generated:
        config = _transformer(study)
        if self.ep is not None and config.model.experts == 0:
            raise GeneratorError("ep", "the base study's model has no experts (model.experts)")
        limit, unchecked = (self.memory, "") if self.memory is not None else study_memory_capacity(study)
        base = config.model_dump(exclude_unset=True)
        fixed_batch = (
            {} if "global_batch" in config.parallelism.model_fields_set else {"global_batch": config.parallelism.batch}
        )
        points: list[dict[str, Any]] = []
        skipped: Counter[str] = Counter()
        for plan in self._candidates(config, study.npus):
            if isinstance(plan, str):
                skipped[plan] += 1
                continue
            try:
                candidate = TransformerConfig.model_validate(
                    {**base, "parallelism": {**base.get("parallelism", {}), **fixed_batch, **plan}}
                )
            except ValidationError as exc:
                skipped[reason(str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, "))] += 1
                continue
            if limit is not None and _peak_bytes(candidate) > limit:
                skipped[f"do not fit in {format_bytes(limit)}"] += 1
                continue
            points.append({_PLAN + key: value for key, value in {**fixed_batch, **plan}.items()})
        notes = (f"memory not checked: {unchecked}; give the generator memory: SIZE",) if unchecked else ()
        return Generated(points, skipped, notes, noun="plans")

    def size(self, study: Study) -> Size:
        """The combinations :meth:`generate` would try: the plans of every (tp, pp) pair dividing the NPUs, plus one
        per pair that does not."""
        config = _transformer(study)
        candidates = 0
        for tp, pp in self._pairs(study.npus):
            for cp in self.cp or [config.parallelism.cp]:
                if study.npus % (tp * pp * cp):
                    candidates += 1
                else:
                    axes = self._axes(config, tp, pp, study.npus, cp)
                    candidates += math.prod(len(values) for values in axes.values())
        return Size(candidates)

    def _pairs(self, npus: int) -> list[tuple[int, int]]:
        """Every (tp, pp) pair to try; :class:`GeneratorError` when they are too many to even count."""
        tps = self._degrees(self.tp, npus, self.max_tp, "tp")
        pps = self._degrees(self.pp, npus, self.max_pp, "pp")
        if len(tps) * len(pps) > _PAIRS:
            raise GeneratorError(
                "tp", f"{len(tps):,} tp by {len(pps):,} pp degrees are too many pairs to try: list tp and pp values"
            )
        return list(itertools.product(tps, pps))

    def _candidates(self, config: TransformerConfig, npus: int) -> Iterator[dict[str, Any] | str]:
        """Every combination of the features' values, as the plan's keys, or the reason it is no plan at all."""
        for tp, pp, cp in self._degree_triples(config, npus):
            if npus % (tp * pp * cp):
                yield f"tp * pp{' * cp' if self.cp else ''} does not divide the {npus} NPUs"
                continue
            axes = self._axes(config, tp, pp, npus, cp)
            for values in itertools.product(*axes.values()):
                plan: dict[str, Any] = {}
                for key, value in zip(axes, values):
                    if key == "schedule":
                        plan["schedule"], plan["virtual_stages"] = value
                    else:
                        plan[key] = value
                yield plan

    def _degree_triples(self, config: TransformerConfig, npus: int) -> Iterator[tuple[int, int, int]]:
        """Every (tp, pp, cp) to try: the (tp, pp) pairs with each listed cp, else the base study's."""
        for tp, pp in self._pairs(npus):
            for cp in self.cp or [config.parallelism.cp]:
                yield tp, pp, cp

    def _axes(self, config: TransformerConfig, tp: int, pp: int, npus: int, cp: int = 1) -> dict[str, list[Any]]:
        """The values each feature takes with degrees ``tp``, ``pp`` and ``cp`` (dividing the ``npus``)."""
        base, model = config.parallelism, config.model
        dp = npus // (tp * pp * cp)
        axes: dict[str, list[Any]] = {"tp": [tp], "pp": [pp], "dp": [dp]}
        if self.cp is not None:
            axes["cp"] = [cp]
        if self.hsdp is not None:
            axes["hsdp"] = list(self.hsdp)
        if model.experts and "ep" not in self.keep:
            axes["ep"] = self.ep or divisors(dp, None, "ep", "list ep values")
        if "schedule" not in self.keep:
            axes["schedule"] = self._schedules(model.layers, pp)
        if "micro_batch" not in self.keep:
            share = base.batch // dp if base.batch % dp == 0 else 1
            hint = "list micro_batch values or give max_micro_batch"
            axes["micro_batch"] = self.micro_batch or divisors(share, self.max_micro_batch, "micro_batch", hint)
        if "recompute" not in self.keep:
            axes["recompute"] = list(self.recompute or ["none", "selective", "full"])
        if "zero" not in self.keep:
            axes["zero"] = list(self.zero or [0, 1, 2, 3])
        if "sequence_parallel" not in self.keep:
            axes["sequence_parallel"] = [on for on in self.sequence_parallel or [False, True] if tp > 1 or not on]
        if self.order is not None:
            axes["order"] = [list(order) for order in self.order]
        return axes

    @staticmethod
    def _degrees(listed: list[int] | None, npus: int, cap: int | None, option: str) -> list[int]:
        """The listed degrees, else every divisor of ``npus`` up to ``cap``."""
        hint = f"list {option} values or give max_{option}"
        return list(listed) if listed is not None else divisors(npus, cap, option, hint)

    def _schedules(self, layers: int, pp: int) -> list[tuple[str, int]]:
        """``(schedule, virtual_stages)`` pairs: gpipe, 1f1b, zb_h1 and dualpipe with one chunk per stage (DualPipe's
        two copies are not virtual stages), zb_h2 too with more than one stage; zb_v and dualpipev, with more than one
        stage, in a V of two; interleaved, with more than one stage, with the listed virtual stages, else every count
        from 2 dividing the stage's layers."""
        pairs: list[tuple[str, int]] = []
        for schedule in self.schedule or ["gpipe", "1f1b", "interleaved"]:
            if schedule in ("zb_h2", "zb_v", "dualpipev"):
                pairs += [(schedule, 1 if schedule == "zb_h2" else 2)] if pp > 1 else []
            elif schedule != "interleaved":
                pairs.append((schedule, 1))
            elif pp > 1:
                hint = "list virtual_stages values"
                fitting = (
                    [v for v in divisors(layers // pp, None, "virtual_stages", hint) if v > 1]
                    if layers % pp == 0
                    else [2]
                )
                pairs += [("interleaved", v) for v in self.virtual_stages or fitting]
        return pairs


def _transformer(study: Study) -> TransformerConfig:
    """The base study's transformer; :class:`GeneratorError` for any other workload."""
    config = study.workload.config
    if not isinstance(config, TransformerConfig):
        raise GeneratorError(
            "generator", f"needs a base study whose workload is kind: transformer, not {study.workload.kind}"
        )
    return config


def _peak_bytes(config: TransformerConfig) -> int:
    """The most any NPU of the plan holds at once, by the builder's own memory accounting."""
    workload = TransformerWorkload(config)
    return max(workload.stage_memory(stage).total_bytes for stage in range(config.parallelism.pp))
