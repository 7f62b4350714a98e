"""A real filesystem of a chosen size, for the tests of a disk that fills or is too small: a tmpfs (only the bytes
written take memory, so even a 10 GB one costs what the test writes), else a loop-mounted ext4 image. Mounting needs
root or CAP_SYS_ADMIN; the test is skipped, saying so, where neither can be mounted."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_volume(mount: Path, size_bytes: int) -> Iterator[Path]:
    """`mount` (created) holds a filesystem of `size_bytes` while the block runs; unmounted after, lazily when a
    process still holds it."""
    mount.mkdir(parents=True, exist_ok=True)
    image = mount.with_name(f"{mount.name}.img")
    tried = []
    for command in (
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mount)],
        ["sh", "-c", f"truncate -s {size_bytes} {image} && mkfs.ext4 -q {image} && mount -o loop {image} {mount}"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            break
        tried.append(done.stderr.strip())
    else:
        pytest.skip(f"cannot mount a small filesystem here (needs root or CAP_SYS_ADMIN): {tried}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(volume: Path) -> Path:
    """Fill the volume to its last byte; the file that fills it (delete it to free the space)."""
    filler = volume / "filler"
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass
    return filler
