"""``{generator: topology}``: topology shapes for a chip count, as DEAP searches them (Liu et al., section V-A).

Each point sets ``network.topology`` (the rest of the base study's network stays):

- ``torus``: every way of writing ``chips`` as a product of ``dimensions`` (1, 2 or 3) factors of at least 2, as
  ring dimensions innermost first (``2x4`` is ``[{kind: ring, size: 2, ...}, {kind: ring, size: 4, ...}]``; 1-D is
  one ring of every chip) — each dimension with its own ``bandwidth`` and ``latency``;
- ``mesh``: the same shapes as ``{kind: mesh, shape: [...]}`` fabrics routed link by link (one link speed, so
  a per-dimension bandwidth or latency that differs skips them);
- ``switch``: every chip on one switch (no direct chip-to-chip links, DEAP's "no connection" case), at dimension
  0's speed unless ``switch: {bandwidth, latency}`` gives its own (DEAP's chips without links reach each other
  through their NICs, slower than a link);
- ``random``: ``random.count`` connected random graphs of the chips (``kind: graph``), drawn with
  ``random.seed``: a random spanning tree, then random extra links until ``random.links_per_chip`` on average.

Orderings are distinct shapes: ``2x4`` and ``4x2`` are the same torus up to relabelling, but dimension 0 is
where consecutive NPU ids sit (a workload's innermost groups, TP for a transformer), and per-dimension speeds
differ; ``distinct_orders: false`` keeps one of each (sizes ascending, the smallest innermost). A chip count with no
shape of some dimensionality (13 in 2-D: only DEAP's degenerate 13x1) is counted as skipped.

``fill_dp: true`` makes a chip-count study of the base study's transformer (DEAP's Fig. 10: the same workload on
more chips): each point also sets ``workload.parallelism.dp`` to fill its chips (``chips / (tp pp)``, the base's
``tp`` and ``pp``) and ``micro_batch`` so that the global batch and the micro-batches per pipeline stay the base's.
A chip count the plan cannot fill that way (not a multiple of ``tp pp``, a global batch ``dp`` does not divide, or
any other rule of the transformer's schema) is skipped under its reason, with all its shapes.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from stratasim.explore.generators import Generated, Generator, GeneratorError, Size, divisors, reason
from stratasim.kernel import units
from stratasim.kernel.schema import Section
from stratasim.workload_layer.transformer.config import TransformerConfig

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["TopologyGenerator", "factorisations"]

_CHIP_BYTES = 200  # a chip's entry of a graph fabric, or a dimension of a shape, as a point holds it
_LINK_BYTES = 100  # a link of a graph fabric
_FEWER_CHIPS = "give chip counts with fewer divisors to search, or only kinds switch and random"


def _checked(parse: Any) -> AfterValidator:
    def check(value: str | int | float) -> str | int | float:
        try:
            parse(value)
        except units.UnitError as exc:
            raise ValueError(str(exc)) from None
        return value

    return AfterValidator(check)


def _listed(value: Any) -> Any:
    """One value stands for a list of one (one chip count; every dimension alike)."""
    return value if isinstance(value, list) else [value]


BandwidthText = Annotated[str | int | float, _checked(units.parse_bandwidth)]
LatencyText = Annotated[str | int | float, _checked(units.parse_time_ps)]
PerDimension = BeforeValidator(_listed)


class RandomGraphs(Section):
    """``random:``: how many connected random graphs, their seed, and the links per chip on average."""

    count: int = Field(ge=1)
    """How many random graphs per chip count."""
    seed: int = 0
    """Their seed."""
    links_per_chip: float = Field(default=2.0, ge=1.0, allow_inf_nan=False)
    """Links per chip on average (at least the spanning tree's)."""


class SwitchSpeed(Section):
    """``switch:``: the switch's own link speed (each key defaults to dimension 0's)."""

    bandwidth: BandwidthText | None = None
    """The switch's link bandwidth (default: dimension 0's)."""
    latency: LatencyText | None = None
    """The switch's link latency (default: dimension 0's)."""


class TopologyGenerator(Generator):
    """``generator: topology`` and its options (the module docstring says what each shape is)."""

    model_config = ConfigDict(title="generator: topology")

    generator: Literal["topology"]
    """topology: topology shapes for chip counts, as DEAP searches them."""
    chips: Annotated[list[Annotated[int, Field(ge=2)]], BeforeValidator(_listed), Field(min_length=1)]
    """The chip counts (one, or a list)."""
    kinds: list[Literal["torus", "mesh", "switch", "random"]] = Field(default=["torus", "mesh", "switch"], min_length=1)
    """The shapes to try: torus, mesh, switch, random."""
    dimensions: list[Literal[1, 2, 3]] = Field(default=[1, 2, 3], min_length=1)
    """The dimensionalities of torus and mesh shapes."""
    bandwidth: Annotated[list[BandwidthText], PerDimension, Field(min_length=1)] = ["50GB/s"]
    """Each dimension's link bandwidth, innermost first (a short list repeats its last)."""
    latency: Annotated[list[LatencyText], PerDimension, Field(min_length=1)] = ["500ns"]
    """Each dimension's link latency, innermost first (a short list repeats its last)."""
    distinct_orders: bool = True
    """Try 2x4 and 4x2 as distinct shapes (false: one of each, ascending)."""
    random: RandomGraphs | None = None
    """The random graphs, when kinds names random."""
    switch: SwitchSpeed = Field(default_factory=SwitchSpeed)
    """The switch's own link speed."""
    fill_dp: bool = False
    """Set the base transformer's dp (and micro-batch) to fill each chip count."""

    @model_validator(mode="after")
    def _random_described(self) -> TopologyGenerator:
        if ("random" in self.kinds) != (self.random is not None):
            raise ValueError("kinds names random exactly when random: {count, seed, links_per_chip} describes them")
        return self

    def size(self, study: Study) -> Size:
        """Per chip count: a switch, ``random.count`` graphs (with their links) and at most one torus or mesh per
        ordered tuple of the count's divisors, a dimension each but the last."""
        candidates, held = 0, 0
        for chips in self.chips:
            if "switch" in self.kinds:
                candidates += 1
            if self.random is not None:
                links = min(self.random.links_per_chip * chips / 2, chips * (chips - 1) / 2)
                candidates += self.random.count
                held += int(min(self.random.count * (chips * _CHIP_BYTES + links * _LINK_BYTES), 2**62))
            grids = len({"torus", "mesh"} & set(self.kinds))
            if grids:
                count = len(divisors(chips, None, "chips", _FEWER_CHIPS))
                shapes = sum(count ** (dimensions - 1) for dimensions in self.dimensions)
                candidates += grids * shapes
                held += grids * shapes * _CHIP_BYTES * max(self.dimensions)
        return Size(candidates, held, max(self.chips))

    def generate(self, study: Study) -> Generated:
        points: list[dict[str, Any]] = []
        skipped: Counter[str] = Counter()
        for chips in self.chips:
            shapes: list[dict[str, Any]] = []
            for kind in self.kinds:
                if kind == "switch":
                    shapes.append({"network.topology": [self._switch(chips)]})
                elif kind == "random":
                    shapes += [{"network.topology": graph} for graph in self._graphs(chips)]
                else:
                    self._grids(kind, chips, shapes, skipped)
            plan = _filled_plan(study, chips) if self.fill_dp else {}
            if isinstance(plan, str):
                skipped[plan] += len(shapes)
            else:
                points += [{**shape, **plan} for shape in shapes]
        return Generated(points, skipped, noun="topologies")

    def _grids(self, kind: str, chips: int, points: list[dict[str, Any]], skipped: Counter[str]) -> None:
        """The torus or mesh shapes of ``chips`` (appended to ``points``), counting the dimensionalities with none."""
        for dimensions in self.dimensions:
            shapes = factorisations(chips, dimensions, self.distinct_orders)
            if not shapes:
                skipped[f"{dimensions}-D shapes of a chip count with too few factors"] += 1
            for shape in shapes:
                if kind == "torus":
                    points.append(
                        {"network.topology": [self._dimension("ring", size, i) for i, size in enumerate(shape)]}
                    )
                elif len({str(self._speed(i)) for i in range(len(shape))}) > 1:
                    skipped["meshes with a different link speed per dimension (a mesh has one)"] += 1
                else:
                    bandwidth, latency = self._speed(0)
                    points.append(
                        {
                            "network.topology": {
                                "kind": "mesh",
                                "shape": list(shape),
                                "bandwidth": bandwidth,
                                "latency": latency,
                            }
                        }
                    )

    def _speed(self, dimension: int) -> tuple[str | float, str | float]:
        """Dimension ``dimension``'s bandwidth and latency (a short list repeats its last entry)."""
        return (
            self.bandwidth[min(dimension, len(self.bandwidth) - 1)],
            self.latency[min(dimension, len(self.latency) - 1)],
        )

    def _dimension(self, kind: str, size: int, index: int) -> dict[str, Any]:
        bandwidth, latency = self._speed(index)
        return {"kind": kind, "size": size, "bandwidth": bandwidth, "latency": latency}

    def _switch(self, chips: int) -> dict[str, Any]:
        """One switch of every chip, at ``switch``'s speed where it gives one."""
        bandwidth, latency = self._speed(0)
        return {
            "kind": "switch",
            "size": chips,
            "bandwidth": self.switch.bandwidth or bandwidth,
            "latency": self.switch.latency or latency,
        }

    def _graphs(self, chips: int) -> list[dict[str, Any]]:
        """``random.count`` connected random graphs of ``chips`` chips, seeded by ``random.seed`` and the count."""
        assert self.random is not None  # kinds names random only with random given (validated)
        rng = random.Random(f"{self.random.seed}:{chips}")
        bandwidth, latency = self._speed(0)
        # capped before rounding: links per chip near the largest float times the chips is infinite
        wanted = round(min(self.random.links_per_chip * chips / 2, chips * (chips - 1) // 2))
        graphs = []
        for _ in range(self.random.count):
            order = list(range(chips))
            rng.shuffle(order)
            links = {tuple(sorted((order[i], order[rng.randrange(i)]))) for i in range(1, chips)}  # a spanning tree
            while len(links) < wanted:
                a, b = rng.sample(range(chips), 2)
                links.add((min(a, b), max(a, b)))
            chip_links: dict[int, list[dict[str, str]]] = {chip: [] for chip in range(chips)}
            for a, b in sorted(links):
                chip_links[a].append({"to": str(b)})
            graphs.append(
                {
                    "kind": "graph",
                    "bandwidth": bandwidth,
                    "latency": latency,
                    "chips": [{"id": str(chip), "links": chip_links[chip]} for chip in range(chips)],
                }
            )
        return graphs


def factorisations(
    chips: int, dimensions: int, distinct_orders: bool = True, factors: list[int] | None = None
) -> list[tuple[int, ...]]:
    """Every way to write ``chips`` as an ordered product of ``dimensions`` factors of at least 2 (only the
    ascending ones unless ``distinct_orders``), in lexicographic order. ``factors``: the divisors of ``chips`` or of
    a multiple of it, if known."""
    if dimensions == 1:
        return [(chips,)] if chips >= 2 else []
    factors = factors if factors is not None else divisors(chips, None, "chips", _FEWER_CHIPS)
    shapes = []
    for first in factors:
        if 2 <= first <= chips // 2 and chips % first == 0:
            shapes += [
                (first, *rest)
                for rest in factorisations(chips // first, dimensions - 1, distinct_orders, factors)
                if distinct_orders or first <= rest[0]
            ]
    return shapes


def _filled_plan(study: Study, chips: int) -> dict[str, Any] | str:
    """``fill_dp``'s plan keys for ``chips`` chips (the base transformer's tp and pp, dp filling the chips, the
    micro-batch keeping the global batch and the micro-batches per pipeline), or why there is none."""
    config = study.workload.config
    if not isinstance(config, TransformerConfig):
        raise GeneratorError(
            "fill_dp", f"needs a base study whose workload is kind: transformer, not {study.workload.kind}"
        )
    plan = config.parallelism
    if chips % (plan.tp * plan.pp):
        return "chip counts not a multiple of the base plan's tp * pp"
    dp = chips // (plan.tp * plan.pp)
    per_pipeline = plan.batch // (plan.micro_batch * plan.dp)
    if plan.batch % (dp * per_pipeline):
        return "chip counts whose dp does not divide the global batch into the base's micro-batches per pipeline"
    keys = {"dp": dp, "micro_batch": plan.batch // (dp * per_pipeline), "global_batch": plan.batch}
    base = config.model_dump(exclude_unset=True)
    try:
        TransformerConfig.model_validate({**base, "parallelism": {**base.get("parallelism", {}), **keys}})
    except ValidationError as exc:
        return reason(str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, "))
    return {f"workload.parallelism.{key}": value for key, value in keys.items()}
