"""No planted secret comes out of eyas: not in a file it writes, a byte it prints, or a command line `ps` shows.

The transcript keeps no digest of a file that carries secrets (a weak key would be guessed from it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, secrets_file
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript import FileWriteEvent, read_transcript

WEAK_KEY = "hunter2"  # short enough that trying every key against a recorded sha256 finds it


def test_a_secrets_file_is_recorded_without_a_digest_and_still_replays(tmp_path: Path) -> None:
    spec = JobSpec(job_id="weak", argv=["/bin/true"], secrets={"EYAS_WEAK_KEY": WEAK_KEY})
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path, [WEAK_KEY])
    launched = recorder.node("launch", Jobs(recorder.host(LocalHost()), str(tmp_path)).launch, spec)
    recorder.close()

    written = secrets_file(spec.secrets).encode()
    assert (tmp_path / "jobs" / "weak" / "secrets.env").read_bytes() == written  # the job still gets its key
    assert hashlib.sha256(written).hexdigest() not in path.read_text()
    (event,) = [
        e for e in read_transcript(path).events if isinstance(e, FileWriteEvent) and e.path.endswith("/secrets.env")
    ]
    assert (event.sha256, event.content, event.size, event.secret) == (None, None, len(written), True)

    session = ReplaySession.load(path, [WEAK_KEY])
    replayed = session.node("launch", Jobs(session.host("local"), str(tmp_path)).launch, spec)
    assert session.report().ok, session.report()
    assert replayed == launched
