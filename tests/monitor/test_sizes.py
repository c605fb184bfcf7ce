"""Sizes in bytes as the options and variables take them (monitor.sizes)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.sizes import MAX_SIZE, format_size, parse_size


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1048576", 1 << 20),
        ("512MiB", 512 << 20),
        ("512mib", 512 << 20),
        (" 64 MiB ", 64 << 20),
        ("16MB", 16_000_000),
        ("1.5GiB", 3 << 29),
        ("1.5KB", 1500),
        ("0.5B", 0),  # under the minimum below
        ("2TiB", 2 << 40),
        ("3kb", 3000),
        ("10b", 10),
        (".5KiB", 512),
        ("1.005KB", 1005),  # exact: a float makes it 1004
        ("0.1MB", 100_000),
        ("512Mi", 512 << 20),  # Kubernetes' suffixes
        ("5M", 5_000_000),
        ("2k", 2000),
        ("1.5Gi", 3 << 29),
        ("007B", 7),
    ],
)
def test_sizes_parse(text: str, want: int) -> None:
    if want:
        assert parse_size(text) == want
    else:
        with pytest.raises(ValueError, match="too small: at least 1B"):
            parse_size(text)


@pytest.mark.parametrize(
    "text",
    ["", "MiB", "1e6", "-1", "1 2", "12 parsecs", "64Mbit", "0x10", "1,024", "nan", "inf",
     "\u0661\u0662MiB", "\uff11KB"],  # digits other than ASCII
)
def test_what_is_not_a_size_says_what_to_write(text: str) -> None:
    want = r"invalid size .*: use a number of bytes, or with a unit: B, KB, .* 512MiB.* Ki"
    with pytest.raises(ValueError, match=want):
        parse_size(text)


def test_a_lowercase_m_alone_is_refused_as_kubernetes_reads_it_as_thousandths() -> None:
    with pytest.raises(ValueError, match="lowercase m is a thousandth in Kubernetes quantities; write M or MB"):
        parse_size("500m")
    assert parse_size("500M") == parse_size("500mb") == 500_000_000 and parse_size("1mi") == 1 << 20


def test_bounds() -> None:
    assert parse_size("1KiB", minimum=1024) == 1024
    with pytest.raises(ValueError, match="too small: at least 1KiB"):
        parse_size("1000", minimum=1024)
    assert parse_size("1024TiB") == MAX_SIZE
    with pytest.raises(ValueError, match="too large: at most 1024TiB"):
        parse_size("1025TiB")
    with pytest.raises(ValueError, match="too large"):
        parse_size("9" * 400)
    with pytest.raises(ValueError, match="too large"):
        parse_size("1024.5TiB")  # the whole part is MAX_SIZE, the half past it
    assert parse_size("1125899906842624.5") == MAX_SIZE  # the half byte rounded down
    assert parse_size("1125899906842623.99") == MAX_SIZE - 1
    assert parse_size("0" * 100 + "12") == 12
    assert parse_size("1." + "9" * 64 + "KB") == 1999
    assert parse_size("0" * 5000 + "1") == 1  # zeros are not digits that count
    assert parse_size("1." + "0" * 100 + "KB") == 1000
    with pytest.raises(ValueError, match="too many digits after the point: at most 64"):
        parse_size("1." + "9" * 65)


@pytest.mark.parametrize(
    ("n", "text"),
    [(512 << 20, "512MiB"), (16_000_000, "16MB"), (1536, "1536B"), (1 << 10, "1KiB"), (0, "0B"), (10**12, "1TB")],
)
def test_format(n: int, text: str) -> None:
    assert format_size(n) == text


@given(st.integers(min_value=1, max_value=MAX_SIZE))
def test_a_formatted_size_parses_back(n: int) -> None:
    assert parse_size(format_size(n)) == n
