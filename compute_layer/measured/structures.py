"""The presets a fitted device can take its structure from, apart from the device section so that the command line
(``stratasim profile --like``) offers them without importing pydantic's sections."""

from stratasim.compute_layer.device_presets import PRESETS

__all__ = ["STRUCTURES"]

STRUCTURES = tuple(name for name, preset in PRESETS.items() if preset.tiling is not None and preset.sram is not None)
"""The presets whose structure a fit can assume (they describe their tiling and L2)."""
