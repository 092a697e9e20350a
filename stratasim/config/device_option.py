"""``--device`` read as a study reads ``compute.device``: a preset's name, or YAML flow text describing a device
(``{preset: h100, memory_bandwidth: 4TB/s}``, a whole device, ``{file: chip.yaml}`` relative to the working folder
with keys beside it overriding the file's), validated by the compute section itself, every problem named by the
flag (``--device.memory_bandwidth``)."""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.compute_layer.sections import ComputeSection
from stratasim.config.problems import validated_section
from stratasim.config.study_file import with_device_file
from stratasim.kernel.errors import ConfigError, InputError
from stratasim.kernel.safe_load import parse_yaml

__all__ = ["device_option"]

_SECTION = "compute.device"


def device_option(
    text: str,
    backend: str,
    *,
    profile: str | None = None,
    objective: str | None = None,
    flag: str = "--device",
    command: str = "stratasim cost",
) -> ComputeSection:
    """The compute section pricing on ``--device TEXT`` with ``backend`` (and the command's ``profile`` and
    ``objective``); :class:`ConfigError` from ``command``, naming ``flag``, when the text describes no device that
    backend reads."""
    value: object = text.strip()
    if text.lstrip().startswith("{"):
        try:
            value = parse_yaml(text, flag)
        except InputError as exc:
            raise ConfigError(command, [(flag, f"cannot read {text!r} as YAML: {exc.what}")]) from None
    problems: list[tuple[str, str]] = []
    # The flag as the study file naming the device file: a relative path is read from the working folder.
    compute, readable = with_device_file({"backend": backend, "device": value}, flag, problems, [])
    section = None
    if readable and isinstance(compute, Mapping):
        given = {key: item for key, item in (("profile", profile), ("objective", objective)) if item is not None}
        section = validated_section(ComputeSection, {**compute, **given}, "compute", problems)
    if section is None:
        raise ConfigError(command, [(_named_by(flag, path), message) for path, message in problems])
    return section


def _named_by(flag: str, path: str) -> str:
    """``compute.device.peak.bf16`` as ``--device.peak.bf16``; the section's own problems as the flag's."""
    return flag + path[len(_SECTION) :] if path.startswith(_SECTION) else flag
