"""The baseline of tests/bench/bench_generate.py: the least a client can do per chat request, in plain asyncio.

N connections kept alive, each sending a POST and reading a Content-Length answer, nothing parsed
beyond the headers. Run as its own process, like generate.py, so both pay the same start-up.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit


async def connection(host: str, port: int, path: str, body: bytes, jobs: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    while jobs:
        jobs.pop()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line[15:]) for line in head.split(b"\r\n") if line[:15].lower() == b"content-length:")
        json.loads(await reader.readexactly(length))
    writer.close()


async def main(url: str, requests: int, concurrency: int) -> None:
    parts = urlsplit(url)
    body = json.dumps({"model": "stub-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    jobs = list(range(requests))
    started = time.monotonic()
    await asyncio.gather(
        *(
            connection(parts.hostname or "", parts.port or 80, parts.path + "/chat/completions", body.encode(), jobs)
            for _ in range(concurrency)
        )
    )
    print(json.dumps({"requests": requests, "wall_s": time.monotonic() - started}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
