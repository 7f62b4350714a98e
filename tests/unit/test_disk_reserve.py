"""The disk reserve scales with the volume: a floor for small disks, a share for large ones, a ceiling for huge."""

from __future__ import annotations

from eyas.tools.planning.reserve import RESERVE_CEILING_BYTES, RESERVE_FLOOR_BYTES, disk_reserve_bytes
from eyas.tools.settings.units import parse_size


def test_a_small_volume_keeps_the_floor() -> None:
    assert disk_reserve_bytes(parse_size("100GB")) == RESERVE_FLOOR_BYTES
    assert disk_reserve_bytes(0) == RESERVE_FLOOR_BYTES
    assert disk_reserve_bytes(-1) == RESERVE_FLOOR_BYTES  # a df that went wrong never lowers the reserve


def test_a_large_volume_keeps_two_percent() -> None:
    assert disk_reserve_bytes(parse_size("2.9TB")) == parse_size("58GB")
    assert disk_reserve_bytes(parse_size("1TB")) == parse_size("20GB")


def test_a_huge_volume_is_capped() -> None:
    assert disk_reserve_bytes(parse_size("50TB")) == RESERVE_CEILING_BYTES
    assert disk_reserve_bytes(parse_size("10TB")) == RESERVE_CEILING_BYTES
