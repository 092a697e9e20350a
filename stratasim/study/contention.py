"""Whether a study's collectives slow the compute they overlap, device by device (``system.contention``).

The compute backend says what collectives take of each device (``DeviceFacts.comm_footprint``) and whether its
model already absorbs that (efficiencies fitted to whole runs); unset, the key counts it where it is not absorbed.
"""

from __future__ import annotations

from stratasim.config.study_file import Study
from stratasim.kernel.errors import ConfigError
from stratasim.study.device import StudyDevices
from stratasim.system_layer import Contention

__all__ = ["contention_of"]


def contention_of(study: Study, devices: StudyDevices | None) -> dict[str, Contention] | None:
    """Each device's :class:`Contention` where it counts (None: nowhere); ``system.contention: true`` on a device
    whose footprint the backend does not know is a :class:`ConfigError`."""
    asked = study.system.contention
    if devices is None or asked is False:
        return None
    counted: dict[str, Contention] = {}
    unknown = []
    for name, facts in devices.facts.items():
        if not facts.HasField("comm_footprint"):
            unknown.append(name)
        elif asked or not facts.comm_footprint.absorbed:
            counted[name] = Contention.of(facts.comm_footprint)
    if asked and unknown:
        raise ConfigError(
            study.source,
            [
                (
                    "system.contention",
                    f"true, but the compute backend knows no SM count and collective footprint of device "
                    f"{unknown[0]!r} (known for the a100, h100 and h200 presets); set it false or leave it unset",
                )
            ],
        )
    return counted or None
