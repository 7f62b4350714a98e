"""Bad input, one table: each case runs the real `eyas` command line and must end with its exit code, without a
traceback, in a message that names the problem and the fix. Classes: run ids, configs, transcripts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from in_process import eyas

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline" / "transcript.jsonl"

# -- run ids ----------------------------------------------------------------------------------------------------

BAD_RUN_IDS = {
    "dotdot": "..",
    "escape": "../escaped-run",
    "slash": "a/b",
    "empty": "",
    "too-long": "r" * 65,
    "unicode": "rün",
    "leading-dash": "-rf",
    "nul": "run\x00x",
    "space": "my run",
    "markup": "x[/]",
}


def run_id_argv(command: str, run_id: str) -> list[str]:
    """Where each command takes a run id; `--` and `=` keep an id that starts with a dash an id."""
    if command == "run":
        return ["run", f"--run-id={run_id}"]
    if command == "chat":
        return ["chat", f"--run={run_id}"]
    return [command, "--", run_id]


# -- configs ----------------------------------------------------------------------------------------------------

VALID_CONFIG = """
[hosts.box]
address = "local"
python = "/usr/bin/python3"
workdir = "/tmp/eyas-work"

[target]
host = "box"
base_url = "http://127.0.0.1:8000"
model = "m"
"""


def config_with(old: str, new: str) -> str:
    assert old in VALID_CONFIG
    return VALID_CONFIG.replace(old, new)


# -- transcripts ------------------------------------------------------------------------------------------------


def event(seq: int, **fields: object) -> dict[str, object]:
    command = {"host": "local", "command": f"echo {seq}", "timeout": 10.0, "rc": 0, "stdout": f"line {seq}\n"}
    return {"v": 1, "seq": seq, "kind": "command", "task": "main", "t": 1000.0 + seq, **command, **fields}


def jsonl(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def three_with_middle(middle: str) -> str:
    """Two good events around one bad line: the bad one is line 2."""
    return jsonl(json.dumps(event(0)), middle, json.dumps(event(2)))


def recorded_start(**input_fields: object) -> str:
    """The example run's first event (how it started), with its input changed."""
    start = json.loads(EXAMPLE.read_text().split("\n", 1)[0])
    start["input"].update(input_fields)
    return jsonl(json.dumps(start))


def recorded_config(base_url: str) -> str:
    start = json.loads(EXAMPLE.read_text().split("\n", 1)[0])
    start["config"]["target"]["base_url"] = base_url
    return jsonl(json.dumps(start))


# -- the table ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    kind: str  # the class of input: run id, config, transcript
    name: str
    argv: list[str]
    code: int
    says: tuple[str, ...]  # the problem and the fix, each a substring of the output
    files: dict[str, str | bytes] = field(default_factory=dict)  # written under the test's folder first
    env: dict[str, str] = field(default_factory=dict)
    check: Callable[[Path], None] | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"


RUN_ID_FIX = ("is not a valid run id", "ASCII letters, digits", "Use an id of that form")


def nothing_outside_runs(root: Path) -> None:
    assert not (root / "escaped-run").exists()
    runs = root / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())


RUN_ID_CASES = (
    [
        Case("run id", f"{command}:{name}", run_id_argv(command, run_id), 2, RUN_ID_FIX, check=nothing_outside_runs)
        for command in ("run", "resume", "approve", "status", "chat")
        for name, run_id in BAD_RUN_IDS.items()
    ]
    + [
        Case(
            "run id",
            f"replay:{name}",
            ["replay", "t.jsonl"],
            2,
            ("run_id", "is not a run id", "Replay an unmodified recording"),
            files={"t.jsonl": recorded_start(run_id=run_id)},
        )
        for name, run_id in BAD_RUN_IDS.items()
    ]
    + [
        Case(
            "run id",
            "replay:missing",
            ["replay", "t.jsonl"],
            2,
            ("run_id", "Replay an unmodified recording"),
            files={"t.jsonl": recorded_start(run_id=None)},
        ),
    ]
)

CHECK_FIX = "eyas config init example.toml"
LOAD_FIX = "Run `eyas config check"
CONFIG_CASES = [
    Case("config", "binary", ["config", "check", "c.toml"], 1, ("not UTF-8 text", CHECK_FIX),
         files={"c.toml": b"\x7fELF\x02\x01\x01\x00\xd0\xff" * 10}),
    Case("config", "binary-run", ["run", "--config", "c.toml"], 2, ("not UTF-8 text", LOAD_FIX),
         files={"c.toml": b"\x7fELF\x02\x01\x01\x00\xd0\xff" * 10}),
    Case("config", "directory", ["config", "check", "d"], 2, ("a directory, not a config file", "Pass an existing"),
         files={"d/x": ""}),
    Case("config", "directory-verify", ["verify", "--config", "d"], 2, ("a directory", "Pass an existing"),
         files={"d/x": ""}),
    Case("config", "empty", ["config", "check", "c.toml"], 1, ("hosts: Field required", CHECK_FIX),
         files={"c.toml": ""}),
    Case("config", "invalid-toml", ["config", "check", "c.toml"], 1, ("not valid TOML", CHECK_FIX),
         files={"c.toml": "[hosts.box\naddress = 'local'"}),
    Case("config", "wrong-type-port", ["config", "check", "c.toml"], 1, ("hosts.box.port", CHECK_FIX),
         files={"c.toml": config_with('address = "local"', 'address = "local"\nport = "ssh"')}),
    Case("config", "wrong-type-hosts", ["config", "check", "c.toml"], 1, ("hosts", CHECK_FIX),
         files={"c.toml": 'hosts = 5\n[target]\nbase_url = "http://h:1"\nmodel = "m"\n'}),
    Case("config", "ssh-port", ["config", "check", "c.toml"], 1, ("hosts.box.port", "65535", CHECK_FIX),
         files={"c.toml": config_with('address = "local"', 'address = "local"\nport = 70000')}),
    Case("config", "url-port-99999", ["config", "check", "c.toml"], 1,
         ("target.base_url", "out of range", "write it like"),
         files={"c.toml": config_with("8000", "99999")}),
    Case("config", "url-port-99999-verify", ["verify", "--config", "c.toml"], 2, ("target.base_url", LOAD_FIX),
         files={"c.toml": config_with("8000", "99999")}),
    Case("config", "url-port-0", ["config", "check", "c.toml"], 1, ("target.base_url", "write it like"),
         files={"c.toml": config_with("8000", "0")}),
    Case("config", "url-port-word", ["config", "check", "c.toml"], 1, ("target.base_url", "write it like"),
         files={"c.toml": config_with("8000", "http")}),
    Case("config", "url-no-host", ["config", "check", "c.toml"], 1, ("target.base_url", "write it like"),
         files={"c.toml": config_with("http://127.0.0.1:8000", "http://")}),
    Case("config", "url-no-scheme", ["config", "check", "c.toml"], 1, ("must start with http://", CHECK_FIX),
         files={"c.toml": config_with("http://127.0.0.1:8000", "127.0.0.1:8000")}),
    Case("config", "ipv6-unclosed", ["config", "check", "c.toml"], 1, ("Invalid IPv6 URL", "http://[fd00::5]:8000"),
         files={"c.toml": config_with("127.0.0.1:8000", "[::1")}),
    Case("config", "ipv6-unclosed-verify", ["verify", "--config", "c.toml"], 2, ("Invalid IPv6 URL", LOAD_FIX),
         files={"c.toml": config_with("127.0.0.1:8000", "[::1")}),
    Case("config", "ipv6-not-an-address", ["config", "check", "c.toml"], 1, ("zz::1", "write it like"),
         files={"c.toml": config_with("127.0.0.1", "[zz::1]")}),
    Case("config", "target-host-undefined", ["config", "check", "c.toml"], 1,
         ("not in [hosts] (defined: box)", CHECK_FIX),
         files={"c.toml": config_with('host = "box"', 'host = "gpu"')}),
    Case("config", "target-host-undefined-run", ["run", "--config", "c.toml"], 2, ("not in [hosts]", LOAD_FIX),
         files={"c.toml": config_with('host = "box"', 'host = "gpu"')}),
    Case("config", "markup-in-path", ["run", "--config", "x[bold]y.toml"], 2, ("x[bold]y.toml", "eyas config init"),),
    Case("config", "env-port-word", ["config", "check"], 2, ("EYAS_TARGET_PORT is 'notaport'", "unset it"),
         env={"EYAS_TARGET_PORT": "notaport"}),
    Case("config", "env-port-range", ["verify"], 2, ("EYAS_TARGET_PORT is '70000'", "1 to 65535"),
         env={"EYAS_TARGET_PORT": "70000"}),
    Case("config", "env-port-run", ["run"], 2, ("EYAS_TARGET_PORT is '-1'", "unset it"),
         env={"EYAS_TARGET_PORT": "-1"}),
    Case("config", "env-config-missing", ["config", "check"], 2, ("$EYAS_CONFIG names", "Point $EYAS_CONFIG at"),
         env={"EYAS_CONFIG": "absent.toml"}),
    Case("config", "env-config-directory", ["verify"], 2, ("a directory", "Point $EYAS_CONFIG at"),
         files={"d/x": ""}, env={"EYAS_CONFIG": "d"}),
    Case("config", "env-config-binary", ["config", "check"], 1, ("not UTF-8 text", CHECK_FIX),
         files={"c.toml": b"\xff\xfe\x00"}, env={"EYAS_CONFIG": "c.toml"}),
]  # fmt: skip

CORRUPT_FIX = "Restore the file from a copy"
OTHER_VERSION_FIX = "Read it with the eyas that recorded it"
SKIPPED_FIX = "read them with the eyas that recorded the run"
NESTED = '{"v":1,"seq":1,"kind":"node","task":"main","t":1,"node":"n","phase":"end","output":' + "[" * 100_000
TRANSCRIPT_CASES = [
    Case("transcript", "nested", ["show", "t.jsonl"], 2, ("line 2 nests JSON deeper", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(NESTED + "]" * 100_000 + "}")}),
    Case("transcript", "nan", ["show", "t.jsonl"], 2, ("line 2 holds NaN", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(json.dumps(event(1, t=float("nan"))))}),
    Case("transcript", "infinity", ["show", "t.jsonl"], 2, ("line 2 holds Infinity", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(json.dumps(event(1, duration_s=float("inf"))))}),
    Case("transcript", "huge-time", ["show", "t.jsonl"], 2, ("line 2", "finite number", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(json.dumps(event(1)).replace('"t": 1001.0', '"t": 1e400'))}),
    Case("transcript", "directory", ["show", "d"], 2, ("is a folder", "pass the transcript.jsonl in it"),
         files={"d/x": ""}),
    Case("transcript", "directory-replay", ["replay", "d"], 2, ("is a folder", "pass the transcript.jsonl in it"),
         files={"d/x": ""}),
    Case("transcript", "missing", ["show", "absent.jsonl"], 2, ("No transcript at", "runs/<run_id>/transcript.jsonl")),
    Case("transcript", "null-line", ["show", "t.jsonl"], 2, ("line 2 is null, not an event", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle("null")}),
    Case("transcript", "array-line", ["show", "t.jsonl"], 2, ("line 2 is list, not an event", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle("[1, 2]")}),
    Case("transcript", "no-version", ["show", "t.jsonl"], 2, ("line 2 has no schema version", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle("{}")}),
    Case("transcript", "mid-file-garbage", ["show", "t.jsonl"], 2, ("line 2 is not JSON", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle("this is not an event")}),
    Case("transcript", "mid-file-binary", ["show", "t.jsonl"], 2, ("line 2 is not UTF-8 text", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle("@@").encode().replace(b"@@", b"\xff\xfe")}),
    Case("transcript", "mid-file-bad-field", ["show", "t.jsonl"], 2,
         ("line 2 is not a valid event (command.rc", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(json.dumps(event(1, rc="zero")))}),
    Case("transcript", "mid-file-corruption-replay", ["replay", "t.jsonl"], 2, ("line 2 is not JSON", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle('{"v":1,"seq":1,"kind":"comm#nd"}}')}),
    Case("transcript", "unknown-kind", ["show", "t.jsonl"], 0,
         ("echo 0", "echo 2", "? line 2 is an event of kind 'teleport'", "1 line skipped", SKIPPED_FIX),
         files={"t.jsonl": three_with_middle(json.dumps({**event(1), "kind": "teleport"}))}),
    Case("transcript", "other-version", ["show", "t.jsonl"], 0,
         ("echo 0", "echo 2", "line 2 has schema version 2", SKIPPED_FIX),
         files={"t.jsonl": three_with_middle(json.dumps({**event(1), "v": 2}))}),
    Case("transcript", "unknown-kind-replay", ["replay", "t.jsonl"], 2,
         ("line 2 is an event of kind 'teleport'", OTHER_VERSION_FIX),
         files={"t.jsonl": three_with_middle(json.dumps({**event(1), "kind": "teleport"}))}),
    Case("transcript", "empty", ["show", "t.jsonl"], 2, ("holds no complete event", "Pass the transcript of a run"),
         files={"t.jsonl": ""}),
    Case("transcript", "empty-replay", ["replay", "t.jsonl"], 2, ("has no run event", "`eyas run`"),
         files={"t.jsonl": ""}),
    Case("transcript", "truncated-last-line", ["show", "t.jsonl"], 0, ("echo 0", "line 3 is incomplete", "skipped"),
         files={"t.jsonl": three_with_middle(json.dumps(event(1))).rstrip("\n")[:-9]}),
    Case("transcript", "recorded-config-port", ["replay", "t.jsonl"], 2, ("target.base_url", "Replay an unmodified"),
         files={"t.jsonl": recorded_config("http://127.0.0.1:99999")}),
]  # fmt: skip

# -- sizes: every count has bounds (tools/settings/sizes.py SIZE_LIMITS), checked before anything starts ---------


def nothing_set_up(root: Path) -> None:
    nothing_outside_runs(root)
    assert not (root / "cache").exists()  # `eyas demo` refused before building or starting its target


HUGE = str(10**20)  # above 2**64: a checkpoint could not store it
SIZE_CASES = [
    Case("size", "run-samples-huge", ["run", "--samples", HUGE, "--dry-run"], 2,
         ("samples", "less than or equal to 100000000"), check=nothing_outside_runs),
    Case("size", "run-ttt-steps", ["run", "--ttt-steps", "1000"], 2, ("ttt_steps", "less than or equal to 64"),
         check=nothing_outside_runs),
    Case("size", "run-max-tokens-zero", ["run", "--max-tokens", "0"], 2, ("max_tokens", "greater than 0"),
         check=nothing_outside_runs),
    Case("size", "plan-samples-huge", ["plan", "--samples", HUGE], 2, ("samples", "less than or equal to 100000000")),
    Case("size", "plan-samples-zero", ["plan", "--samples", "0"], 2, ("samples", "greater than 0")),
    Case("size", "plan-epochs-huge", ["plan", "--epochs", HUGE], 2, ("epochs", "less than or equal to 1000")),
    Case("size", "demo-epochs-huge", ["demo", "--epochs", HUGE], 2, ("epochs", "less than or equal to 1000"),
         check=nothing_set_up),
]  # fmt: skip

CASES = RUN_ID_CASES + CONFIG_CASES + TRANSCRIPT_CASES + SIZE_CASES


@pytest.fixture(autouse=True)
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each case in its own folder, with its own runs folder and target cache: nothing of the machine's."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("EYAS_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("EYAS_TARGET_PORT", "EYAS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_readable_paragraph(case: Case, scratch: Path) -> None:
    for name, content in case.files.items():
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    ran = eyas(*case.argv, env=case.env)
    assert "Traceback" not in ran.output, ran.output
    assert ran.code == case.code, ran.output
    for phrase in case.says:
        assert phrase in ran.output, f"{phrase!r} missing from:\n{ran.output}"
    if case.check is not None:
        case.check(scratch)
