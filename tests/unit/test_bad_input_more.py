"""More rows of the bad-input table (test_bad_input.py, whose Case, scratch folder and one-paragraph rule these reuse):
where `eyas config init` writes, and an EYAS_RUNS_DIR no folder can be at. Each runs the real `eyas` command line
and must end with exit 2, without a traceback, in one paragraph that names the problem and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bad_input import Case, paragraph, scratch

from in_process import eyas

__all__ = ["scratch"]  # the table's autouse fixture: each case in its own folder, runs folder and cache

RUNS_FIX = "Point EYAS_RUNS_DIR at a folder eyas may create and write"
TOO_LONG = "x" * 300  # longer than any Linux filesystem's 255-byte names


def runs_dir(path: str) -> dict[str, str]:
    return {"EYAS_RUNS_DIR": path}


CASES = [
    Case("config-init", "under-proc", ["config", "init", "/proc/eyas.toml"], 2,
         ("could not write the example config to /proc/eyas.toml", "pass a path in a folder you may write")),
    Case("config-init", "directory-force", ["config", "init", "d", "--force"], 2,
         ("d is a directory, not a config file", "pass a file name, such as d/eyas.toml"), files={"d/x": ""}),
    Case("runs-dir", "a-file", ["run", "--run-id", "r1"], 2, ("is a file, not a folder", RUNS_FIX),
         files={"f": ""}, env=runs_dir("f")),
    Case("runs-dir", "a-file-status", ["status", "r1"], 2, ("is a file, not a folder", RUNS_FIX),
         files={"f": ""}, env=runs_dir("f")),
    Case("runs-dir", "under-a-file", ["run", "--run-id", "r1"], 2, ("which is a file", RUNS_FIX),
         files={"f": ""}, env=runs_dir("f/runs")),
    Case("runs-dir", "name-too-long", ["run", "--run-id", "r1"], 2, ("has a name longer than the", RUNS_FIX),
         env=runs_dir(TOO_LONG)),
    Case("runs-dir", "name-too-long-status", ["status", "r1"], 2, ("has a name longer than the", RUNS_FIX),
         env=runs_dir(TOO_LONG)),
    Case("runs-dir", "under-proc", ["run", "--run-id", "r1"], 2, ("could not create the run folder /proc/", RUNS_FIX),
         env=runs_dir("/proc/eyas-runs")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_readable_paragraph(case: Case, scratch: Path) -> None:
    for name, content in case.files.items():
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    ran = eyas(*case.argv, env=case.env)
    assert "Traceback" not in ran.output, ran.output
    assert ran.code == case.code, ran.output
    said = paragraph(ran.output, case.says[0])
    assert all(phrase in said for phrase in case.says), f"not in one paragraph:\n{ran.output}"
