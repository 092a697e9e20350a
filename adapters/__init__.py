"""Third-party simulators as compute backends: :mod:`adapters.scalesim` (SCALE-Sim) and :mod:`adapters.zigzag`
(ZigZag), each in an optional extra and imported only when a request needs it (see ``adapters/README.md``)."""

__all__: list[str] = []
