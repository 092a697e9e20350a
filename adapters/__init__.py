"""Third-party simulators as compute backends: :mod:`stratasim.adapters.scalesim` (SCALE-Sim) and :mod:`stratasim.adapters.zigzag`
(ZigZag), each in an optional extra and imported only when a request needs it (see ``adapters/README.md``)."""

__all__: list[str] = []
