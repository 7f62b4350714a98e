"""TensorBoard event files written with the standard library alone: the host's target environment has no tensorboard
package, and torch.utils.tensorboard (which speculators' TensorBoard logger uses) needs it.

A file is a run of TFRecords: the record's length (uint64, little-endian), the masked CRC-32C of those 8 bytes, the
record, and the masked CRC-32C of the record, where masked = ((crc >> 15 | crc << 17) + 0xA282EAD8) mod 2**32 and
CRC-32C is the Castagnoli polynomial (reflected 0x82F63B78). Each record is an `Event` protobuf: wall_time (field 1,
double), step (2, int64), and one of file_version (3, string; "brain.Event:2" in a file's first event), summary (5, a
`Summary` whose repeated field 1 is `Value{tag: 1 string, simple_value: 2 float}`) or session_log (7, `SessionLog`
whose field 1 is its status, START = 1). A START at step n tells a reader that training restarted there, so it drops
the events at n and after that the earlier, killed process logged.

Each writer starts a file of its own and appends to it record by record, so a resumed run adds a file and never
rewrites one, and a reader watching the directory sees each step as it is written.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

FILE_VERSION = "brain.Event:2"
SESSION_START = 1


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: the framing around `data`."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # int64 as protobuf encodes it: a negative number as its two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _bytes_field(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def event(wall_time: float, step: int, *, file_version: str = "", scalars: dict[str, float] | None = None,
          session_start: bool = False) -> bytes:  # fmt: skip
    """An `Event` message with one of: the file version, scalar values, or a SessionLog START."""
    body = _key(1, 1) + struct.pack("<d", wall_time) + _key(2, 0) + _varint(step)
    if file_version:
        body += _bytes_field(3, file_version.encode())
    if scalars:
        values = (
            _bytes_field(1, _bytes_field(1, tag.encode()) + _key(2, 5) + struct.pack("<f", value))
            for tag, value in scalars.items()
        )
        body += _bytes_field(5, b"".join(values))
    if session_start:
        body += _bytes_field(7, _key(1, 0) + _varint(SESSION_START))
    return body


class EventFile:
    """A new event file in `directory`, named as TensorBoard's writers name theirs ("tfevents" marks it for a reader),
    with a sequence number after the time: a reader takes the files in name order, and two in one second (a quick
    resume) must still come in the order they were started."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        now = time.time()
        sequence = len(list(directory.glob("events.out.tfevents.*")))
        name = f"events.out.tfevents.{int(now):010d}.{sequence:04d}.{socket.gethostname()}.{os.getpid()}"
        self.path = directory / name
        self._append(event(now, 0, file_version=FILE_VERSION))

    def scalars(self, step: int, values: dict[str, float], wall_time: float | None = None) -> None:
        self._append(event(time.time() if wall_time is None else wall_time, step, scalars=values))

    def restart(self, step: int) -> None:
        """Training resumes at `step`: a reader forgets what an earlier file logged from there on."""
        self._append(event(time.time(), step, session_start=True))

    def _append(self, message: bytes) -> None:
        with self.path.open("ab") as handle:
            handle.write(record(message))
