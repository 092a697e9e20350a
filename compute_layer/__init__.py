"""The compute layer: backends that price operators on a device (the ``ComputeBackend`` contract).

Backends are registered under the ``stratasim.compute`` entry-point group and chosen by name; this package
ships ``roofline`` (:class:`~stratasim.compute_layer.roofline.RooflineCompute`) and the device presets it prices on
(:mod:`stratasim.compute_layer.devices`). A new backend implements :class:`~stratasim.kernel.contracts.ComputeBackend` in its
own module and declares an entry point; nothing here lists it. The names are imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratasim.kernel.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from stratasim.compute_layer.device_presets import PRESETS, device
    from stratasim.compute_layer.devices import Device, catalog
    from stratasim.compute_layer.roofline import RooflineCompute

__all__ = ["Device", "PRESETS", "catalog", "device", "RooflineCompute"]


__getattr__ = lazy_exports(__name__, {name: "roofline" if name == "RooflineCompute" else "devices" for name in __all__})
