"""One gate, one answer: two operators (two processes, as two chats are) answering the same gate at the same moment
get exactly one winner; the other is told who answered and when, and the driver's terminal defers to it too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eyas.graph.life.answers import pending_view, record_gate_answer
from eyas.graph.runs import AlreadyAnswered, RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.errors import EyasError
from gated_runs import run_at_data_gate

# What a chat's answer_gate does (agents/faces/chat_control.py), in a process of its own, held at its answer's first
# write:
# the first file it opens for writing under the run's answers (answers/ or answers.jsonl). There it says "writing"
# and waits for the go, which the test sends only when both racers are there: whatever each checked before writing,
# both checked it before either wrote, so a check-then-write race makes two winners every time.
RACER = """
import builtins, io, os, sys
from pathlib import Path
from eyas.graph.life.answers import record_gate_answer
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.errors import EyasError

run, who, action = RunDir(Path(sys.argv[1])), sys.argv[2], sys.argv[3]
answers = (run.root / "answers", run.root / "answers.jsonl")
real_open, real_os_open, held = io.open, os.open, []

def hold(path, writes):
    if writes and not held and isinstance(path, (str, os.PathLike)):
        where = Path(os.fsdecode(path)).absolute()
        if any(where == place or place in where.parents for place in answers):
            held.append(where)
            print("writing", flush=True)
            sys.stdin.readline()

def hooked_open(file, mode="r", *args, **kwargs):
    hold(file, any(c in mode for c in "wax+"))
    return real_open(file, mode, *args, **kwargs)

def hooked_os_open(path, flags, *args, **kwargs):
    hold(path, bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)))
    return real_os_open(path, flags, *args, **kwargs)

builtins.open = io.open = hooked_open
os.open = hooked_os_open
try:
    record_gate_answer(run, GateAnswer(action=action, who=who))
    print("won", flush=True)
except EyasError as exc:
    print("lost:", exc, flush=True)
"""


@pytest.fixture
def gated(tmp_path: Path) -> RunDir:
    return run_at_data_gate(tmp_path / "runs", "race")


def racer(run: RunDir, who: str, action: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RACER, str(run.root), who, action],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_two_operators_answering_at_once_get_exactly_one_winner(gated: RunDir) -> None:
    racers = {"alice": racer(gated, "alice", "approve"), "bob": racer(gated, "bob", "reject")}
    for process in racers.values():  # both at their first write, neither past it
        assert process.stdout is not None
        reached = process.stdout.readline().strip()
        assert reached == "writing", reached or process.communicate(timeout=60)[1]
    for process in racers.values():  # the go, to both, before either has been waited for
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    said = {}
    for who, process in racers.items():
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        said[who] = out.strip()

    winners = [who for who, text in said.items() if text == "won"]
    assert len(winners) == 1, said
    (winner,) = winners
    (loser,) = set(said) - {winner}
    assert f"already answered by {winner} at " in said[loser]
    action = "approve" if winner == "alice" else "reject"
    answer = gated.answer_for(gated_gate(gated))
    assert answer is not None and (answer.who, answer.action) == (winner, action)
    # The log of answers holds the winner alone.
    assert gated.answers.read_text().count('"gate_id"') == 1


def gated_gate(run: RunDir) -> str:
    return pending_view(run)[0]


def test_the_drivers_terminal_defers_to_an_answer_recorded_first(gated: RunDir) -> None:
    gate = gated_gate(gated)
    record_gate_answer(gated, GateAnswer(action="reject", reason="disk", who="dashboard"), gate)
    with pytest.raises(AlreadyAnswered, match=r"already answered by dashboard at \d{4}-\d\d-\d\d .* reject \(disk\)"):
        record_gate_answer(gated, GateAnswer(action="approve", who="cli"), gate)
    # The terminal's late "approve" is not taken: the gate resumes with the answer that won.
    assert gated.settle_answer(gate, GateAnswer(action="approve")).who == "dashboard"


def test_an_answer_that_does_not_fit_the_gate_is_refused_and_claims_nothing(gated: RunDir) -> None:
    with pytest.raises(EyasError, match="An approval gate takes one of: approve, reject, edit; not retry"):
        record_gate_answer(gated, GateAnswer(action="retry"))
    record_gate_answer(gated, GateAnswer(action="approve", who="cli"))
    assert gated.answer_for(gated_gate(gated)) == GateAnswer(action="approve", who="cli")
