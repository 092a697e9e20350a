"""StrataSim: layered, multi-fidelity co-simulation of distributed deep-learning systems.

This package holds the kernel every layer stands on (:mod:`stratasim.kernel`), the generated wire modules
(:mod:`stratasim.v1`, :mod:`stratasim.chakra`) and the composition root that wires the layers: the study file
(:mod:`stratasim.config`), running it (:mod:`stratasim.study`), its report (:mod:`stratasim.report`), the command
line (:mod:`stratasim.cli`), benchmarks, importers and remote layers. The layers install beside them as
``stratasim.workload_layer``, ``stratasim.system_layer``, ``stratasim.network_layer``, ``stratasim.compute_layer``
and ``stratasim.adapters``.
"""

__version__ = "0.1.0"
