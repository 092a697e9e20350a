"""Whether a study's collectives slow the compute they overlap, device by device (``system.contention``).

The compute backend says what collectives take of each device (``DeviceFacts.comm_footprint``) and whether its
model already absorbs that (efficiencies fitted to whole runs); unset, the key counts it where it is not absorbed.
"""

from __future__ import annotations

from stratasim.config.study_file import Study
from stratasim.kernel.errors import ConfigError
from stratasim.study.device import StudyDevices
from stratasim.system_layer import Contention

__all__ = ["contention_of", "contention_statement"]


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


def contention_statement(study: Study, devices: StudyDevices | None) -> str:
    """What the report's calibration line adds when collectives slow compute: each counted device's footprint, as
    ``collectives slow the compute they overlap (system.contention): 32 of 132 SMs, 0.90 of 3.35 TB/s of memory
    bandwidth`` (empty when nowhere)."""
    counted = contention_of(study, devices)
    if not counted or devices is None:
        return ""
    parts = []
    for name in counted:
        footprint = devices.facts[name].comm_footprint
        said = (
            f"{footprint.comm_sms} of {footprint.sms} SMs, {footprint.comm_memory_bytes_per_s / 1e12:.2f} of "
            f"{footprint.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s of memory bandwidth"
        )
        parts.append(f"{name} {said}" if len(devices.facts) > 1 else said)
    return f"collectives slow the compute they overlap (system.contention): {'; '.join(parts)}"
