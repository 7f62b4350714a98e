"""A test hook, and nothing else: `EYAS_CRASH_AT=<point>` makes an `eyas` process kill itself with SIGKILL when it
reaches that named point, so that a test of "a crash here, then `eyas resume`" knows exactly where the crash was
(tests/integration/test_dashboard.py crashes a real run at both). Unset, as it always is outside the tests, it does
nothing."""

from __future__ import annotations

import os
import signal

CRASH_AT = "EYAS_CRASH_AT"
CRASH_POINTS = {
    "before_launch": "in a phase's launch node, its gate's answer checkpointed, before any of its jobs is launched",
    "after_launch": "in a phase's launch node, every job launched, before the node's update is checkpointed",
}


def crash_point(point: str) -> None:
    """SIGKILL this process here when EYAS_CRASH_AT names `point` (one of CRASH_POINTS)."""
    assert point in CRASH_POINTS, point
    if os.environ.get(CRASH_AT) == point:
        os.kill(os.getpid(), signal.SIGKILL)
