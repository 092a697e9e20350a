"""The compute layer: backends that price operators on a device (the ``ComputeBackend`` contract).

Backends are registered under the ``stratasim.compute`` entry-point group and chosen by name; this package
ships ``roofline`` (:class:`~compute_layer.roofline.RooflineCompute`) and the device presets it prices on
(:mod:`compute_layer.devices`). A new backend implements :class:`~stratasim.contracts.ComputeBackend` in its
own module and declares an entry point; nothing here lists it.
"""

from compute_layer.devices import PRESETS, Device, catalog, device
from compute_layer.roofline import RooflineCompute

__all__ = ["Device", "PRESETS", "catalog", "device", "RooflineCompute"]
