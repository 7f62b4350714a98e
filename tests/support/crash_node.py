"""One recorded node that polls the host until a file exists: the smallest run a kill -9 can cut short mid-node.

python crash_node.py TRANSCRIPT FLAG           # the first try (the test kills it while it polls)
python crash_node.py TRANSCRIPT FLAG resume    # the resume: notes where it continues from, runs the node again
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.boundary import Boundary
from eyas.tools.recording.recorder import Recorder

START = {"meta": {"kind": "test"}, "config": {}, "input": {"flag": "the file the node waits for"}}
RESUMED_FROM = {"step": 0, "next": ["poll"]}  # what the resume records (the pipeline's comes from its checkpoint)


def poll(host: Host, clock: Clock, flag: str) -> int:
    """Ask the host until `flag` exists, pausing between asks; how many pauses it took."""
    pauses = 0
    while host.run(f"test -e {shlex.quote(flag)} && echo yes || echo no", timeout=10).stdout.strip() != "yes":
        clock.sleep(0.05)
        pauses += 1
    return pauses


def run_node(boundary: Boundary, host: Host, clock: Clock, flag: str) -> int:
    return boundary.node("poll", poll, host, clock, flag)


def main() -> None:
    transcript, flag = Path(sys.argv[1]), sys.argv[2]
    recorder = Recorder.open(transcript)
    try:
        if sys.argv[3:] == ["resume"]:
            recorder.note("resume", RESUMED_FROM)
        else:
            recorder.note("run", START)
        run_node(recorder, recorder.host(LocalHost()), recorder.clock(), flag)
    finally:
        recorder.close()


if __name__ == "__main__":
    main()
