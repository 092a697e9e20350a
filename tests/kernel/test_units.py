from __future__ import annotations

import pytest

from stratasim.kernel.errors import UnitError
from stratasim.kernel.units import (
    format_bytes,
    format_time_ps,
    parse_bandwidth,
    parse_bytes,
    parse_flops,
    parse_time_ps,
    power_w,
    ps_to_ns,
    ps_to_us,
)


@pytest.mark.parametrize(
    ("text", "ps"),
    [
        ("500ns", 500_000),
        ("1.5us", 1_500_000),
        ("2ms", 2 * 10**9),
        ("1s", 10**12),
        ("7ps", 7),
        ("10ns", 10_000),
        ("0.25 ns", 250),
        ("3µs", 3_000_000),
        ("1e3ns", 10**6),
    ],
)
def test_times_become_picoseconds(text: object, ps: int) -> None:
    assert parse_time_ps(text) == ps


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64MiB", 64 * 2**20),
        ("1GB", 10**9),
        ("1GiB", 2**30),
        ("512B", 512),
        ("4096B", 4096),
        ("1.5KiB", 1536),
        ("2kB", 2000),
    ],
)
def test_sizes_become_bytes(text: object, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize(
    ("text", "bandwidth"),
    [
        ("50GB/s", 50e9),
        ("400Gbps", 50e9),
        ("25GiB/s", 25 * 2**30),
        ("100Mb/s", 12.5e6),
        ("50GB/s", 50e9),
        ("1TB/s", 1e12),
    ],
)
def test_bandwidths_become_bytes_per_second(text: object, bandwidth: float) -> None:
    assert parse_bandwidth(text) == bandwidth


def test_flops() -> None:
    assert parse_flops("989TFLOPS") == 989e12
    assert parse_flops("312 TFLOP/s") == 312e12
    assert parse_flops("2TFLOPS") == 2e12


@pytest.mark.parametrize(
    ("parse", "text", "fragment"),
    [
        (parse_time_ps, "5 parsecs", "unknown time unit"),
        (parse_time_ps, "-1ns", "negative"),
        (parse_bytes, "1.5B", "whole"),
        (parse_bytes, "12 bananas", "unknown size unit"),
        (parse_bandwidth, "0GB/s", "positive"),
        (parse_bandwidth, "50GB", "unknown bandwidth unit"),
        (parse_flops, "fast", "cannot read"),
        (parse_bytes, True, "expected a size"),
        (parse_bytes, [1], "expected a size"),
        (parse_time_ps, 10, r"^10 has no unit; write 10ns if you meant that, or e\.g\. 500ns or 1\.5us$"),
        (parse_time_ps, "0", r"^0 has no unit; write it with one, e\.g\. 500ns"),
        (parse_bytes, 4096, r"^4096 has no unit; write 4096B if you meant that"),
        (
            parse_bandwidth,
            1e11,
            r"^100000000000\.0 has no unit; write 100000000000\.0GB/s if you meant that, or e\.g\. 100GB/s or 400Gbps$",
        ),
        (parse_flops, 2, r"^2 has no unit; write 2TFLOPS if you meant that"),
    ],
)
def test_bad_quantities_say_what_is_expected(parse: object, text: object, fragment: str) -> None:
    with pytest.raises(UnitError, match=fragment):
        parse(text)  # type: ignore[operator]


def test_formatting_for_people() -> None:
    assert format_bytes(2**30) == "1 GiB"
    assert format_bytes(100) == "100 B"
    assert format_time_ps(12_500_000) == "12.5 us"
    assert format_time_ps(3) == "3 ps"


def test_reported_units_come_from_picoseconds_and_picojoules() -> None:
    # ns = ps / 10^3 and us = ps / 10^6, exactly as float division gives them; W = pJ / ps.
    assert (ps_to_ns(12_500_000), ps_to_ns(1), ps_to_ns(2.5)) == (12_500.0, 0.001, 0.0025)
    assert (ps_to_us(12_500_000), ps_to_us(500_000)) == (12.5, 0.5)
    assert power_w(3e12, 10**12) == 3.0  # 3 J over 1 s
    assert power_w(5.0, 0) == 0.0  # no time, no power
