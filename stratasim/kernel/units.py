"""Quantities written as people write them: ``200GB/s``, ``400Gbps``, ``500ns``, ``64MiB``, ``989TFLOPS``.

Decimal prefixes are powers of ten and binary prefixes (``Ki``, ``Mi``, ``Gi``...) powers of two, so
``GB/s`` is 10^9 bytes/s and ``GiB/s`` is 2^30 bytes/s. Times become integer picoseconds (rounded to the
nearest ps), sizes integer bytes, bandwidths bytes per second and throughputs FLOP per second. A quantity must
carry its unit: a bare number (``100000000000``) is an error suggesting one, never read in a default unit; keys
whose name carries the unit (``flit_bytes``, ``usd_per_hour``) are plain numbers and never come here.

Every quantity must also fit: times and sizes the wire's int64 picoseconds and bytes, and each kind within a
physically plausible band (:data:`BANDS`) outside which it is an error — a bandwidth of 10^-30 B/s is a typo, not
a run of 10^39 s. Schema fields may narrow a band further (a latency is at most a second).
"""

from __future__ import annotations

import re
from fractions import Fraction

from stratasim.kernel.errors import UnitError

__all__ = [
    "parse_time_ps",
    "parse_bytes",
    "parse_bandwidth",
    "parse_flops",
    "parse_energy_per_bit_pj",
    "no_unit",
    "format_bytes",
    "format_time_ps",
    "format_energy_pj",
    "ps_to_ns",
    "ps_to_us",
    "power_w",
    "INT64_MAX",
    "BANDS",
    "check_band",
]

_NUMBER = r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?))"
_PATTERN = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[A-Za-z/]*)\s*$")

_DECIMAL = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_PREFIXES: dict[str, int] = {**_DECIMAL, **_BINARY}

_TIME_PS = {"ps": 1, "ns": 10**3, "us": 10**6, "ms": 10**9, "s": 10**12}
_ENERGY_PJ = {"fJ": Fraction(1, 1000), "pJ": Fraction(1), "nJ": Fraction(1000)}

INT64_MAX = 2**63 - 1
"""The largest picosecond time or byte count the wire (int64 fields) and the engine's arrays hold."""

BANDS: dict[str, tuple[Fraction, Fraction, str]] = {
    "time": (Fraction(0), Fraction(INT64_MAX), "the wire's int64 picoseconds (about 106 days)"),
    "size": (Fraction(0), Fraction(2**50), "at most 1 PiB"),
    "bandwidth": (Fraction(10**3), Fraction(10**17), "1kB/s to 100PB/s"),
    "throughput": (Fraction(10**6), Fraction(10**21), "1MFLOPS to 10^21 FLOPS"),
    "energy per bit": (Fraction(0), Fraction(10**4), "at most 10nJ/bit"),
}
"""Per kind of quantity, in base units (ps, B, B/s, FLOP/s, pJ/bit), the inclusive band a value must lie in and
the band as a reader would say it: outside it a value is an error, never read."""


def check_band(value: Fraction, what: str, text: object, high: Fraction | None = None, said: str = "") -> None:
    """Raise :class:`UnitError` unless ``value`` (base units) lies in the band of ``what`` (:data:`BANDS`), or at
    most ``high`` (said as ``said``) when a caller moves its top; ``text`` is what was written."""
    low, band_high, band_said = BANDS[what]
    if not low <= value <= (band_high if high is None else high):
        raise UnitError(f"{text!r} is outside the plausible range of a {what}: {said or band_said}")


def _split(text: object, what: str, examples: str, meant: str) -> tuple[Fraction, str]:
    """The number and the unit of ``text``; UnitError if it is not a number followed by a unit (``examples``
    suggests some; a bare number is told what ``meant`` would make of it)."""
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise UnitError(f"expected {what} such as {examples}, got {text!r}")
    match = _PATTERN.match(text.replace("µ", "u")) if isinstance(text, str) else None
    if isinstance(text, str) and not match:
        raise UnitError(f"cannot read {text!r} as {what}; write it like {examples}")
    if match is None or not match["unit"]:
        raise UnitError(no_unit(text, examples, meant))
    return Fraction(match["num"]), match["unit"]


def no_unit(value: object, examples: str, meant: str = "") -> str:
    """The message for a quantity written without its unit: ``value`` with ``meant`` (the unit a bare number used to
    mean, if any) and ``examples`` with a unit."""
    number = str(value).strip()
    if meant and number.lstrip("+-0.eE") not in ("", "0") and f"{number}{meant}" not in examples.split(" or "):
        return f"{number} has no unit; write {number}{meant} if you meant that, or e.g. {examples}"
    return f"{number} has no unit; write it with one, e.g. {examples}"


def _prefixed(unit: str, suffixes: tuple[str, ...]) -> int | None:
    """Return the multiplier of ``unit`` = prefix + one of ``suffixes``, or None if it is not of that form."""
    for suffix in suffixes:
        if unit.endswith(suffix):
            prefix = unit[: len(unit) - len(suffix)]
            if prefix in _PREFIXES:
                return _PREFIXES[prefix]
    return None


def parse_time_ps(text: object) -> int:
    """Read a duration (``500ns``, ``1.5us``, ``2ms``) as integer picoseconds."""
    value, unit = _split(text, "a time", "500ns or 1.5us", "ns")
    scale = _TIME_PS.get(unit)
    if scale is None:
        raise UnitError(f"unknown time unit {unit!r} in {text!r}; use ps, ns, us, ms or s")
    ps = value * scale
    if ps < 0:
        raise UnitError(f"a time cannot be negative: {text!r}")
    check_band(ps, "time", text)
    return round(ps)


def parse_bytes(text: object) -> int:
    """Read a size (``64MiB``, ``1GB``, ``512B``) as an integer number of bytes."""
    value, unit = _split(text, "a size", "64MiB or 1GB", "B")
    scale = _prefixed(unit, ("B",))
    if scale is None:
        raise UnitError(f"unknown size unit {unit!r} in {text!r}; use B, KB, MB, GB, KiB, MiB, GiB...")
    size = value * scale
    if size < 0 or size.denominator != 1:
        raise UnitError(f"a size must be a whole, non-negative number of bytes: {text!r}")
    check_band(size, "size", text)
    return int(size)


def parse_bandwidth(text: object, high: Fraction | None = None, said: str = "") -> float:
    """Read a bandwidth (``50GB/s``, ``400Gbps``, ``25GiB/s``) as bytes per second, within the band of
    :data:`BANDS` or up to ``high`` (said as ``said``) when a caller widens it."""
    value, unit = _split(text, "a bandwidth", "100GB/s or 400Gbps", "GB/s")
    if (bytes_scale := _prefixed(unit, ("B/s", "Bps"))) is not None:
        scale = Fraction(bytes_scale)
    elif (bits_scale := _prefixed(unit, ("b/s", "bps", "bit/s"))) is not None:
        scale = Fraction(bits_scale, 8)
    else:
        raise UnitError(f"unknown bandwidth unit {unit!r} in {text!r}; use B/s, GB/s, GiB/s, Gbps...")
    bandwidth = value * scale
    if bandwidth <= 0:
        raise UnitError(f"a bandwidth must be positive: {text!r}")
    check_band(bandwidth, "bandwidth", text, high, said)
    return float(bandwidth)


def parse_energy_per_bit_pj(text: object) -> float:
    """Read an energy per bit (``1.3pJ/bit``, ``500fJ/b``) as picojoules per bit."""
    value, unit = _split(text, "an energy per bit", "1.3pJ/bit or 500fJ/bit", "pJ/bit")
    energy, _, per = unit.partition("/")
    scale = _ENERGY_PJ.get(energy)
    if scale is None or per not in ("bit", "b"):
        raise UnitError(f"unknown energy per bit unit {unit!r} in {text!r}; use pJ/bit, fJ/bit or nJ/bit")
    if value < 0:
        raise UnitError(f"an energy per bit cannot be negative: {text!r}")
    check_band(value * scale, "energy per bit", text)
    return float(value * scale)


def parse_flops(text: object) -> float:
    """Read a compute throughput (``989TFLOPS``, ``312TFLOP/s``) as FLOP/s."""
    value, unit = _split(text, "a throughput", "989TFLOPS or 312TFLOP/s", "TFLOPS")
    scale = _prefixed(unit, ("FLOPS", "FLOP/s", "flops", "flop/s", "OPS", "OP/s"))
    if scale is None:
        raise UnitError(f"unknown throughput unit {unit!r} in {text!r}; use TFLOPS, GFLOPS, TOPS...")
    flops = value * scale
    if flops <= 0:
        raise UnitError(f"a throughput must be positive: {text!r}")
    check_band(flops, "throughput", text)
    return float(flops)


def format_bytes(size: int) -> str:
    """Show a byte count with the largest binary prefix that keeps it at or above 1 (``1 GiB``)."""
    for prefix, scale in reversed(list(_BINARY.items())):
        if size >= scale:
            return f"{size / scale:.4g} {prefix}B"
    return f"{size} B"


def format_time_ps(ps: int) -> str:
    """Show a time in the largest unit that keeps it at or above 1 (``12.5 us``)."""
    for unit, scale in (("s", 10**12), ("ms", 10**9), ("us", 10**6), ("ns", 10**3)):
        if abs(ps) >= scale:
            return f"{ps / scale:.6g} {unit}"
    return f"{ps} ps"


def ps_to_ns(ps: float) -> float:
    """Picoseconds as nanoseconds, the unit of every ``*_ns`` figure a report gives (the engine keeps integer ps)."""
    return ps / 1000


def ps_to_us(ps: float) -> float:
    """Picoseconds as microseconds, the unit of a Chrome trace's timestamps."""
    return ps / 1_000_000


def power_w(energy_pj: float, time_ps: int) -> float:
    """Mean power in watts of ``energy_pj`` picojoules spent over ``time_ps`` picoseconds (1 pJ/ps is 1 W); 0 over
    no time."""
    return energy_pj / time_ps if time_ps > 0 else 0.0


def format_energy_pj(pj: float) -> str:
    """Show an energy given in picojoules with the largest prefix that keeps it at or above 1 (``1.23 mJ``)."""
    for scale, unit in ((1e12, "J"), (1e9, "mJ"), (1e6, "uJ"), (1e3, "nJ")):
        if pj >= scale:
            return f"{pj / scale:,.3g} {unit}"
    return f"{pj:,.3g} pJ"
