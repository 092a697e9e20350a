"""``{generator: topology}``: topology shapes for a chip count, as DEAP searches them (Liu et al., section V-A).

Each point sets ``network.topology`` (the rest of the base study's network stays):

- ``torus``: every way of writing ``chips`` as a product of ``dimensions`` (1, 2 or 3) factors of at least 2, as
  ring dimensions innermost first (``2x4`` is ``[{kind: ring, size: 2, ...}, {kind: ring, size: 4, ...}]``; 1-D is
  one ring of every chip) — each dimension with its own ``bandwidth`` and ``latency``;
- ``mesh``: the same shapes as ``{kind: mesh, shape: [...]}`` fabrics routed link by link (one link speed, so
  a per-dimension bandwidth or latency that differs skips them);
- ``switch``: every chip on one switch (no direct chip-to-chip links, DEAP's "no connection" case);
- ``random``: ``random.count`` connected random graphs of the chips (``kind: graph``), drawn with
  ``random.seed``: a random spanning tree, then random extra links until ``random.links_per_chip`` on average.

Orderings are distinct shapes: ``2x4`` and ``4x2`` are the same torus up to relabelling, but dimension 0 is
where consecutive NPU ids sit (a workload's innermost groups, TP for a transformer), and per-dimension speeds
differ; ``distinct_orders: false`` keeps one of each (sizes ascending, the smallest innermost). A chip count with no
shape of some dimensionality (13 in 2-D: only DEAP's degenerate 13x1) is counted as skipped.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from stratasim.explore.generators import Generated, Generator
from stratasim.kernel import units
from stratasim.kernel.schema import Section

if TYPE_CHECKING:
    from stratasim.config.study_file import Study

__all__ = ["TopologyGenerator", "factorisations"]


def _checked(parse: Any) -> AfterValidator:
    def check(value: str | float) -> str | float:
        try:
            parse(value)
        except units.UnitError as exc:
            raise ValueError(str(exc)) from None
        return value

    return AfterValidator(check)


def _listed(value: Any) -> Any:
    """One value stands for a list of one (one chip count; every dimension alike)."""
    return value if isinstance(value, list) else [value]


BandwidthText = Annotated[str | float, _checked(units.parse_bandwidth)]
LatencyText = Annotated[str | float, _checked(units.parse_time_ps)]
PerDimension = BeforeValidator(_listed)


class RandomGraphs(Section):
    """``random:``: how many connected random graphs, their seed, and the links per chip on average."""

    count: int = Field(ge=1)
    seed: int = 0
    links_per_chip: float = Field(default=2.0, ge=1.0)


class TopologyGenerator(Generator):
    """``generator: topology`` and its options (the module docstring says what each shape is)."""

    generator: Literal["topology"]
    chips: Annotated[list[Annotated[int, Field(ge=2)]], BeforeValidator(_listed), Field(min_length=1)]
    kinds: list[Literal["torus", "mesh", "switch", "random"]] = Field(default=["torus", "mesh", "switch"], min_length=1)
    dimensions: list[Literal[1, 2, 3]] = Field(default=[1, 2, 3], min_length=1)
    bandwidth: Annotated[list[BandwidthText], PerDimension, Field(min_length=1)] = ["50GB/s"]
    latency: Annotated[list[LatencyText], PerDimension, Field(min_length=1)] = ["500ns"]
    distinct_orders: bool = True
    random: RandomGraphs | None = None

    @model_validator(mode="after")
    def _random_described(self) -> TopologyGenerator:
        if ("random" in self.kinds) != (self.random is not None):
            raise ValueError("kinds names random exactly when random: {count, seed, links_per_chip} describes them")
        return self

    def generate(self, study: Study) -> Generated:
        points: list[dict[str, Any]] = []
        skipped: Counter[str] = Counter()
        for chips in self.chips:
            for kind in self.kinds:
                if kind == "switch":
                    points.append({"network.topology": [self._dimension("switch", chips, 0)]})
                elif kind == "random":
                    points += [{"network.topology": graph} for graph in self._graphs(chips)]
                else:
                    self._grids(kind, chips, points, skipped)
        return Generated(points, skipped, noun="topologies")

    def _grids(self, kind: str, chips: int, points: list[dict[str, Any]], skipped: Counter[str]) -> None:
        """The torus or mesh shapes of ``chips`` (appended to ``points``), counting the dimensionalities with none."""
        for dimensions in self.dimensions:
            shapes = factorisations(chips, dimensions, self.distinct_orders)
            if not shapes:
                skipped[f"{dimensions}-D shapes of a chip count with too few factors"] += 1
            for shape in shapes:
                if kind == "torus":
                    points.append({"network.topology": [self._dimension("ring", size, i) for i, size in enumerate(shape)]})
                elif len({str(self._speed(i)) for i in range(len(shape))}) > 1:
                    skipped["meshes with a different link speed per dimension (a mesh has one)"] += 1
                else:
                    bandwidth, latency = self._speed(0)
                    points.append({"network.topology": {"kind": "mesh", "shape": list(shape), "bandwidth": bandwidth,
                                                        "latency": latency}})  # fmt: skip

    def _speed(self, dimension: int) -> tuple[str | float, str | float]:
        """Dimension ``dimension``'s bandwidth and latency (a short list repeats its last entry)."""
        return (self.bandwidth[min(dimension, len(self.bandwidth) - 1)],
                self.latency[min(dimension, len(self.latency) - 1)])  # fmt: skip

    def _dimension(self, kind: str, size: int, index: int) -> dict[str, Any]:
        bandwidth, latency = self._speed(index)
        return {"kind": kind, "size": size, "bandwidth": bandwidth, "latency": latency}

    def _graphs(self, chips: int) -> list[dict[str, Any]]:
        """``random.count`` connected random graphs of ``chips`` chips, seeded by ``random.seed`` and the count."""
        assert self.random is not None  # kinds names random only with random given (validated)
        rng = random.Random(f"{self.random.seed}:{chips}")
        bandwidth, latency = self._speed(0)
        wanted = min(round(self.random.links_per_chip * chips / 2), chips * (chips - 1) // 2)
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
            graphs.append({"kind": "graph", "bandwidth": bandwidth, "latency": latency,
                           "chips": [{"id": str(chip), "links": chip_links[chip]} for chip in range(chips)]})  # fmt: skip
        return graphs


def factorisations(chips: int, dimensions: int, distinct_orders: bool = True) -> list[tuple[int, ...]]:
    """Every way to write ``chips`` as an ordered product of ``dimensions`` factors of at least 2 (only the
    ascending ones unless ``distinct_orders``), in lexicographic order."""
    if dimensions == 1:
        return [(chips,)] if chips >= 2 else []
    shapes = []
    for first in range(2, chips // 2 + 1):
        if chips % first == 0:
            shapes += [(first, *rest) for rest in factorisations(chips // first, dimensions - 1, distinct_orders)
                       if distinct_orders or first <= rest[0]]  # fmt: skip
    return shapes
