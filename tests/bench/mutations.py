"""Would the fast tests notice a plausible one-line change to a decision rule? Prints a caught/missed table.

Each mutation below is one line a reviewer could change by mistake (the first five are issue 42's, the rest the
rules a wrong line would turn into a bad night), with the fast tests that must fail on it. The working tree is
copied once to a temporary folder (tracked and untracked files, as `git ls-files` lists them; the working tree
itself is never written); each mutation is applied there, its tests run with the copy as the `eyas` package, and
the file is put back. The unmutated copy runs every named test first: a test that fails without a mutation
proves nothing. Exit 1 when a mutation is missed, is stale (its line is gone) or the baseline fails.

    python tests/bench/mutations.py            # all of them (about a minute on 2 cores)
    python tests/bench/mutations.py policy     # those whose file or test names contain "policy"
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TIMEOUT_S = 300  # a mutation that makes a test hang counts as caught once this passes


@dataclass(frozen=True)
class Mutation:
    file: str
    old: str  # the line as it stands (with its neighbour where it is not unique alone); it must occur once
    new: str
    tests: tuple[str, ...]  # pytest node ids (files or tests) that must fail on the change


M = Mutation
RULES = "tests/unit/test_decision_rules.py::"
DEPLOY = "tests/unit/test_deploy_keep_rule.py::"
MUTATIONS = [
    # Issue 42's five.
    M("graph/phases/deploy/node.py", "ctx.on_note, proposed.ngram_speedup)",
      "ctx.on_note, None)",
      (DEPLOY + "test_the_deploy_phase_rolls_back_a_drafter_that_loses_to_n_gram",)),
    M("tools/service/deploy.py", "service.reload()\n    down = _restart(service, thresholds, progress)",
      "down = _restart(service, thresholds, progress)",
      (DEPLOY + "test_a_rollback_has_the_service_manager_forget_the_drop_in",)),
    M("tools/recording/replay.py", "if self._divergence is not None:",
      "if self._divergence is not None and self._divergence.info.task == task:",
      (RULES + "test_replay_stops_every_task_at_the_first_divergence",)),
    M("graph/policy.py", '(estimate.total_hours, policy.max_total_hours, "run"),',
      '(estimate.phase_hours, policy.max_total_hours, "run"),',
      (RULES + "test_the_run_budget_weighs_the_whole_run_not_the_phase",)),
    M("tools/checks/compat.py", "works = None if value is None else value is True",
      "works = None if value is None else bool(value)",
      (RULES + "test_a_probe_that_answers_an_error_string_does_not_count_as_working",)),
    # Ten more rules a wrong line would turn into a bad night.
    M("tools/planning/hidden_states_mode.py", 'mode: Mode = "hybrid" if kept > 0 else "online"',
      'mode: Mode = "hybrid" if kept >= 0 else "online"', ("tests/unit/test_hidden_states_mode.py",)),
    M("tools/planning/gpu_budget.py", "if len(roomy) >= count:", "if len(roomy) > count:",
      ("tests/unit/test_gpu_budget.py",)),
    M("tools/planning/downtime_window.py", "max(0.0, impact.downtime_hours - load_s / 3600)",
      "max(0.0, impact.downtime_hours - load_s / 60)", ("tests/unit/test_downtime_window.py",)),
    M("tools/service/keep_rule.py", "return self.evaluated + self.margin", "return self.evaluated",
      ("tests/unit/test_deploy_judge.py",)),
    M("tools/service/keep_rule.py", "return value is not None and value >= self.least",
      "return value is None or value >= self.least", ("tests/unit/test_deploy_judge.py",)),
    M("graph/policy.py", "within = disk <= policy.max_disk_bytes", "within = disk / 1e9 <= policy.max_disk_bytes",
      (RULES + "test_the_disk_budget_is_in_bytes",)),
    M("graph/policy.py", "elif hours is None or hours > policy.max_production_downtime_hours:",
      "elif hours is not None and hours > policy.max_production_downtime_hours:", ("tests/unit/test_gpu_budget.py",)),
    M("graph/policy.py", "elif warned and not policy.allow_warnings:", "elif warned and policy.allow_warnings:",
      (RULES + "test_verification_warnings_hold_the_gate_only_where_the_policy_allows_none",)),
    M("tools/jobs/detached.py", "if mkdir {q(directory)} 2>/dev/null; then",
      "if mkdir -p {q(directory)} 2>/dev/null; then",
      (RULES + "test_a_relaunch_of_a_job_that_exists_attaches_to_it_and_starts_nothing",)),
    M("tools/recording/redact.py", "self._secrets = sorted(values, key=len, reverse=True)",
      "self._secrets = sorted(values, key=len)",
      (RULES + "test_a_configured_secret_that_contains_another_is_redacted_whole",)),
    M("tools/workloads/prompt_split.py", "digest = hashlib.sha256(conversation_key(row_id).encode()).digest()",
      "digest = hashlib.sha256(row_id.encode()).digest()", ("tests/unit/test_prompt_split.py",)),
]  # fmt: skip


def copy_tree(destination: Path) -> None:
    """The working tree as it is (tracked and untracked, not ignored) under `destination`, and a folder beside it
    whose `eyas` link makes the copy importable as the package (the root is the package)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / "tree" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    (destination / "pkg").mkdir()
    (destination / "pkg" / "eyas").symlink_to(destination / "tree")


def run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[str, str]:
    """ "passed", "failed", "error" (pytest could not run them: an import broke) or "hung", and the first line
    pytest marked as the failure (so a reader sees that the assertion, not an accident, caught it)."""
    env = {**os.environ, "PYTHONPATH": str(tree.parent / "pkg"), "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    try:
        ran = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=TEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "hung", ""
    first = next((line[1:].strip() for line in ran.stdout.splitlines() if line.startswith("E ")), "")
    return {0: "passed", 1: "failed"}.get(ran.returncode, "error"), first


def apply(tree: Path, mutation: Mutation) -> str | None:
    """Write the mutated file; returns the original text, or None when the old line is not there exactly once."""
    path = tree / mutation.file
    text = path.read_text()
    if text.count(mutation.old) != 1:
        return None
    path.write_text(text.replace(mutation.old, mutation.new))
    return text


def main(only: str = "") -> int:
    chosen = [m for m in MUTATIONS if only in m.file or any(only in test for test in m.tests)]
    with tempfile.TemporaryDirectory(prefix="eyas-mutations-") as scratch:
        copy_tree(Path(scratch))
        tree = Path(scratch) / "tree"
        every_test = tuple(dict.fromkeys(test for m in chosen for test in m.tests))
        baseline, why = run_tests(tree, every_test)
        print(f"baseline (no mutation, {len(every_test)} tests): {baseline}")
        if baseline != "passed":
            print(why)
            return 1
        rows = []
        for mutation in chosen:
            original = apply(tree, mutation)
            if original is None:
                rows.append((mutation, "STALE: the line is not there once", ""))
                continue
            try:
                outcome, why = run_tests(tree, mutation.tests)
            finally:
                (tree / mutation.file).write_text(original)
            rows.append((mutation, "missed" if outcome == "passed" else f"caught ({outcome})", why))
    for mutation, verdict, why in rows:
        print(f"{verdict:<16} {mutation.file}: {mutation.new.strip()[:70]}")
        if why:
            print(f"{'':<16}   {why[:110]}")
    caught = sum(verdict.startswith("caught") for _, verdict, _ in rows)
    print(f"{caught} of {len(rows)} caught")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
