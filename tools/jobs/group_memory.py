"""How much memory a detached job holds: the resident memory of every process in its group (the wrapper leads the
group it starts with setsid, and `Jobs.cancel` stops that group), so a vLLM server's engine processes count too."""

from __future__ import annotations

from eyas.tools.hosts.host import Host


def group_resident_bytes(host: Host, group: int) -> int | None:
    """The summed resident memory (RSS) of the processes in process group `group`; None when none is left. Pages
    the processes share (libraries, a forked parent's) count once per process, as `ps` shows them."""
    listing = host.run("ps -e -o pgid=,rss=", timeout=30)
    if not listing.ok:
        return None
    kib = [int(rss) for pgid, rss in _pairs(listing.stdout) if pgid == group]
    return sum(kib) * 1024 if kib else None


def _pairs(listing: str) -> list[tuple[int, int]]:
    rows = (line.split() for line in listing.splitlines())
    return [(int(row[0]), int(row[1])) for row in rows if len(row) == 2 and row[0].isdigit() and row[1].isdigit()]
