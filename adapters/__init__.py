"""Third-party simulators as backends: :mod:`stratasim.adapters.scalesim` (SCALE-Sim) and :mod:`stratasim.adapters.zigzag`
(ZigZag) price operators, :mod:`stratasim.adapters.ns3` (ns-3) delivers messages; each in an optional extra and
imported only when a request needs it (see ``adapters/README.md``)."""

__all__: list[str] = []
