"""Bad input, one table: each case runs the real `eyas` command line and must end with its exit code, without a
traceback, in a message that names the problem and the fix. Classes: run ids, configs, transcripts."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.verify import verify
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.ssh import SSHHost
from eyas.tools.settings.config import HostConfig, TargetConfig
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


def ssh_config_with(line: str) -> str:
    """The valid config with its host reached over SSH (never dialled: the config is refused first), its known_hosts
    ./kh (an empty file unless the case writes another), and `line` added to the host."""
    return config_with('address = "local"', f'address = "10.0.0.9"\nknown_hosts = "kh"\n{line}')


def fifo(name: str) -> Callable[[Path], None]:
    """A real named pipe: reading it as a key or a config would wait for a writer that never comes."""
    return lambda root: os.mkfifo(root / name)


def link_loop(name: str) -> Callable[[Path], None]:
    """`name` -> `name`.other -> `name`: a real symbolic link loop."""

    def make(root: Path) -> None:
        (root / name).symlink_to(root / f"{name}.other")
        (root / f"{name}.other").symlink_to(root / name)

    return make


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
    setup: Callable[[Path], None] | None = None  # makes what files cannot hold (a FIFO, a link loop)

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

# -- config values and the local files a config names: each said as what it is, refused before anything connects --

DEEP_TOML = "a = " + "[" * 5000 + "]" * 5000 + "\n"
KEY_FIX = "point key_file at the private key file"
KNOWN_HOSTS_FIX = "point known_hosts at a text file of the host keys you trust"
POLICY_RUN = ["run", "--config", "c.toml", "--policy", "p.toml"]
POLICY_FIX = "Pass --policy a TOML text file of budgets"
VALUE_CASES = [
    Case("policy", "nested-5000", ["run", "--config", "c.toml", "--policy", "p.toml"], 2,
         ("The policy file p.toml nests tables or arrays deeper",), files={"c.toml": VALID_CONFIG, "p.toml": DEEP_TOML},
         check=nothing_outside_runs),
    Case("policy", "inf-hours", ["run", "--config", "c.toml", "--policy", "p.toml"], 2,
         ("The policy file p.toml is invalid", "max_phase_hours", "finite number"),
         files={"c.toml": VALID_CONFIG, "p.toml": "max_phase_hours = inf\n"}, check=nothing_outside_runs),
    Case("policy", "directory", POLICY_RUN, 2, ("The policy file p.toml is a directory, not a file", POLICY_FIX),
         files={"c.toml": VALID_CONFIG, "p.toml/x": ""}, check=nothing_outside_runs),
    Case("policy", "fifo", POLICY_RUN, 2, ("The policy file p.toml is a FIFO (named pipe)", POLICY_FIX),
         files={"c.toml": VALID_CONFIG}, setup=fifo("p.toml"), check=nothing_outside_runs),
    Case("policy", "dev-zero", ["run", "--config", "c.toml", "--policy", "/dev/zero"], 2,
         ("The policy file /dev/zero is a character device, not a regular file", POLICY_FIX),
         files={"c.toml": VALID_CONFIG}, check=nothing_outside_runs),
    Case("policy", "binary", POLICY_RUN, 2, ("The policy file p.toml is not text (not UTF-8 at byte 8)", POLICY_FIX),
         files={"c.toml": VALID_CONFIG, "p.toml": b"\x7fELF\x02\x01\x01\x00\xd0\xff"}, check=nothing_outside_runs),
    Case("policy", "missing", POLICY_RUN, 2, ("The policy file p.toml does not exist", POLICY_FIX),
         files={"c.toml": VALID_CONFIG}, check=nothing_outside_runs),
    Case("config", "nested-5000", ["config", "check", "c.toml"], 1,
         ("c.toml: nests tables or arrays deeper than Python's TOML reader can follow", CHECK_FIX),
         files={"c.toml": DEEP_TOML}),
    Case("config", "nested-5000-run", ["run", "--config", "c.toml"], 2,
         ("nests tables or arrays deeper", "eyas config init NEW.toml", LOAD_FIX),
         files={"c.toml": DEEP_TOML}, check=nothing_outside_runs),
    Case("config", "key-file-dev-zero", ["config", "check", "c.toml"], 1,
         ("hosts.box.key_file: /dev/zero on this machine is a character device, not a regular file", KEY_FIX),
         files={"c.toml": ssh_config_with('key_file = "/dev/zero"'), "kh": ""}),
    Case("config", "key-file-fifo", ["config", "check", "c.toml"], 1,
         ("hosts.box.key_file: pipe on this machine is a FIFO (named pipe), not a regular file", KEY_FIX),
         files={"c.toml": ssh_config_with('key_file = "pipe"'), "kh": ""}, setup=fifo("pipe")),
    Case("config", "key-file-link-loop", ["verify", "--config", "c.toml"], 2,
         ("hosts.box.key_file: loop on this machine is a symbolic link that loops", KEY_FIX, LOAD_FIX),
         files={"c.toml": ssh_config_with('key_file = "loop"'), "kh": ""}, setup=link_loop("loop")),
    Case("config", "key-file-directory", ["config", "check", "c.toml"], 1,
         ("hosts.box.key_file: keys on this machine is a directory, not a file", KEY_FIX),
         files={"c.toml": ssh_config_with('key_file = "keys"'), "kh": "", "keys/id_ed25519": ""}),
    Case("config", "known-hosts-not-text", ["config", "check", "c.toml"], 1,
         ("hosts.box.known_hosts: kh is not text (not UTF-8 at byte 0)", KNOWN_HOSTS_FIX, "ssh-keyscan -p 22 10.0.0.9"),
         files={"c.toml": ssh_config_with(""), "kh": b"\xff\xfe\x00\x01"}),
    Case("config", "known-hosts-not-text-verify", ["verify", "--config", "c.toml"], 2,
         ("hosts.box.known_hosts: kh is not text", KNOWN_HOSTS_FIX, LOAD_FIX),
         files={"c.toml": ssh_config_with(""), "kh": b"\xff\xfe\x00\x01"}),
    Case("config", "known-hosts-fifo", ["config", "check", "c.toml"], 1,
         ("hosts.box.known_hosts: kh is a FIFO (named pipe), not a regular file", KNOWN_HOSTS_FIX),
         files={"c.toml": ssh_config_with("")}, setup=fifo("kh")),
    Case("config", "config-is-a-fifo", ["config", "check", "c.toml"], 2,
         ("--config names c.toml, which is a FIFO (named pipe), not a regular file", "Pass an existing config file"),
         setup=fifo("c.toml")),
    Case("config", "port-true", ["config", "check", "c.toml"], 1,
         ("hosts.box.port: is true, a boolean, not a number", "write a whole number", CHECK_FIX),
         files={"c.toml": config_with('address = "local"', 'address = "local"\nport = true')}),
    Case("config", "deadline-inf", ["config", "check", "c.toml"], 1,
         ("target.generation_deadline_s: Input should be a finite number", CHECK_FIX),
         files={"c.toml": VALID_CONFIG + "generation_deadline_s = inf\n"}),
    Case("config", "load-time-nan-run", ["run", "--config", "c.toml"], 2,
         ("target.load_time_s: Input should be a finite number", LOAD_FIX),
         files={"c.toml": VALID_CONFIG + "load_time_s = nan\n"}, check=nothing_outside_runs),
    Case("config", "load-wait-inf", ["config", "check", "c.toml"], 1,
         ("target.load_wait_s: Input should be a finite number", CHECK_FIX),
         files={"c.toml": VALID_CONFIG + "load_wait_s = inf\n"}),
    Case("config", "model-empty", ["config", "check", "c.toml"], 1,
         ("target.model: is empty ('')", "name the served model as the server's /v1/models lists it"),
         files={"c.toml": config_with('model = "m"', 'model = ""')}),
    Case("config", "workdir-root", ["verify", "--config", "c.toml"], 2,
         ("hosts.box.workdir: is the root folder ('/')", "give it a folder of its own", LOAD_FIX),
         files={"c.toml": config_with('workdir = "/tmp/eyas-work"', 'workdir = "/"')}),
    Case("config", "extract-shards-huge", ["config", "check", "c.toml"], 1,
         ("cluster.extract_shards: Input should be less than or equal to 10000", CHECK_FIX),
         files={"c.toml": VALID_CONFIG + "\n[cluster]\nextract_shards = 1000000000000\n"}),
]  # fmt: skip

CORRUPT_FIX = "Restore the file from a copy"
LONE_SURROGATE = json.dumps(event(1, stdout="half a pair: \ud800 alone"))  # json.dumps spells it as the escape
OTHER_VERSION_FIX = "Read it with the eyas that recorded it"
SKIPPED_FIX = "read them with the eyas that recorded the run"
NESTED = '{"v":1,"seq":1,"kind":"node","task":"main","t":1,"node":"n","phase":"end","output":' + "[" * 100_000
TRANSCRIPT_CASES = [
    Case("transcript", "show-dev-zero", ["show", "/dev/zero"], 2,
         ("/dev/zero is a character device, not a regular file", "pass a runs/<run_id>/transcript.jsonl")),
    Case("transcript", "show-fifo", ["show", "t.jsonl"], 2, ("t.jsonl is a FIFO (named pipe)",), setup=fifo("t.jsonl")),
    Case("transcript", "replay-fifo", ["replay", "t.jsonl"], 2, ("t.jsonl is a FIFO (named pipe)",),
         setup=fifo("t.jsonl")),
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
    Case("transcript", "missing", ["show", "absent.jsonl"], 6, ("No transcript at", "runs/<run_id>/transcript.jsonl")),
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
    Case("transcript", "lone-surrogate", ["show", "t.jsonl"], 2,
         ("line 2 holds \\ud800, half of a UTF-16 surrogate pair without its other half", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(LONE_SURROGATE)}),
    Case("transcript", "lone-surrogate-replay", ["replay", "t.jsonl"], 2, ("line 2 holds \\ud800", CORRUPT_FIX),
         files={"t.jsonl": three_with_middle(LONE_SURROGATE)}),
]  # fmt: skip

# -- sizes: every count has bounds (tools/settings/sizes.py SIZE_LIMITS), checked before anything starts ---------


def nothing_set_up(root: Path) -> None:
    nothing_outside_runs(root)
    assert not (root / "cache").exists()  # `eyas demo` refused before building or starting its target


HUGE = str(10**20)  # above 2**64: a checkpoint could not store it
NO_PROMPT_ROOM = ["--samples", "25000", "--max-tokens", "4096", "--max-seq-len", "4096"]
NO_PROMPT_ROOM_SAYS = ("max_seq_len 4096 leaves no room for a prompt beside max_tokens 4096",
                       "raise max_seq_len (--max-seq-len) to at least 4160",
                       "or lower max_tokens (--max-tokens) to at most 4032")  # fmt: skip
EXTRACTION_MODE_SAYS = ("extraction_mode: must be one of auto, offline, online, hybrid",
                        "online: fetched from an extraction server during training")  # fmt: skip
SIZE_CASES = [
    Case("size", "run-poll-interval-negative", ["run", "--poll-interval=-1"], 2,
         ("--poll-interval", "is -1 seconds", "give a number of seconds above 0"), check=nothing_outside_runs),
    Case("size", "watch-interval-negative", ["watch", "--once", "--interval=-1"], 2,
         ("--interval", "is -1 seconds", "give a number of seconds above 0")),
    Case("size", "watch-interval-nan", ["watch", "--once", "--interval=nan"], 2,
         ("--interval", "is nan seconds", "give a number of seconds above 0")),
    Case("size", "run-samples-huge", ["run", "--samples", HUGE, "--dry-run"], 2,
         ("samples", "less than or equal to 100000000"), check=nothing_outside_runs),
    Case("size", "run-ttt-steps", ["run", "--ttt-steps", "1000"], 2, ("ttt_steps", "less than or equal to 64"),
         check=nothing_outside_runs),
    Case("size", "run-max-tokens-zero", ["run", "--max-tokens", "0"], 2, ("max_tokens", "greater than 0"),
         check=nothing_outside_runs),
    # The motivating operator's sizes at the default --max-seq-len: no room for a prompt beside the answer (the split
    # kept 0 of 313 prompts, and the run ended after its data gate), refused before anything starts, in one paragraph.
    Case("size", "run-no-room-for-a-prompt", ["run", *NO_PROMPT_ROOM], 2, NO_PROMPT_ROOM_SAYS,
         check=nothing_outside_runs),
    Case("size", "dry-run-no-room-for-a-prompt", ["run", "--dry-run", *NO_PROMPT_ROOM], 2, NO_PROMPT_ROOM_SAYS,
         check=nothing_outside_runs),
    Case("size", "plan-no-room-for-a-prompt", ["plan", *NO_PROMPT_ROOM], 2, NO_PROMPT_ROOM_SAYS),
    Case("size", "plan-samples-huge", ["plan", "--samples", HUGE], 2, ("samples", "less than or equal to 100000000")),
    Case("size", "plan-samples-zero", ["plan", "--samples", "0"], 2, ("samples", "greater than 0")),
    Case("size", "plan-epochs-huge", ["plan", "--epochs", HUGE], 2, ("epochs", "less than or equal to 1000")),
    Case("size", "demo-epochs-huge", ["demo", "--epochs", HUGE], 2, ("epochs", "less than or equal to 1000"),
         check=nothing_set_up),
    # A mode eyas does not have: refused before anything starts, naming the ones it has and what each means.
    Case("size", "run-extraction-mode-unknown", ["run", "--extraction-mode", "streaming", "--dry-run"], 2,
         EXTRACTION_MODE_SAYS, check=nothing_outside_runs),
    Case("size", "plan-extraction-mode-unknown", ["plan", "--extraction-mode", "streaming"], 2,
         EXTRACTION_MODE_SAYS),
]  # fmt: skip

# -- `eyas plan`'s figures of the host: each has bounds (tools/planning/figures.py `Figures`), nan and inf refused --

# Every figure given, so that nothing is measured and no host is needed; a case replaces one of them.
ALL_FIGURES = {"--hidden-size": "4096", "--num-layers": "32", "--vocab-size": "128000", "--free-disk": "3TB",
               "--throughput": "1000", "--prompt-tokens": "100"}  # fmt: skip
FIGURE_FIX = "leave the flag out and eyas measures it on the host"


def plan_with(flag: str, value: str) -> list[str]:
    figures = {**ALL_FIGURES, flag: value}
    return ["plan", *(f"{name}={given}" for name, given in figures.items())]


FIGURE_CASES = [
    Case("figure", "samples-negative", ["plan", "--samples=-1"], 2, ("samples", "greater than 0")),
    Case("figure", "throughput-zero", plan_with("--throughput", "0"), 2,
         ("--throughput is 0.0, and should be greater than 0", FIGURE_FIX)),
    Case("figure", "throughput-nan", plan_with("--throughput", "nan"), 2,
         ("--throughput is nan, and should be a finite number", FIGURE_FIX)),
    Case("figure", "throughput-inf", plan_with("--throughput", "inf"), 2,
         ("--throughput is inf, and should be a finite number", FIGURE_FIX)),
    Case("figure", "prompt-tokens-negative", plan_with("--prompt-tokens", "-50"), 2,
         ("--prompt-tokens is -50.0, and should be greater than or equal to 0", FIGURE_FIX)),
    Case("figure", "prompt-tokens-nan", plan_with("--prompt-tokens", "nan"), 2,
         ("--prompt-tokens is nan, and should be a finite number", FIGURE_FIX)),
    Case("figure", "hidden-size-zero", plan_with("--hidden-size", "0"), 2,
         ("--hidden-size is 0, and should be greater than 0", FIGURE_FIX)),
    Case("figure", "hidden-size-huge", plan_with("--hidden-size", HUGE), 2,
         ("--hidden-size is 100000000000000000000, and should be less than or equal to 1048576", FIGURE_FIX)),
    Case("figure", "free-disk-overflow", plan_with("--free-disk", "1e400TB"), 2,
         ("--free-disk", "'1e400TB' is more than eyas takes for a size", "write the real figure, e.g. 2.9TB")),
    Case("figure", "probe-concurrency-zero", ["plan", "--probe-concurrency=0"], 2,
         ("--probe-concurrency", "greater than or equal to 1")),
]  # fmt: skip

CASES = RUN_ID_CASES + CONFIG_CASES + VALUE_CASES + TRANSCRIPT_CASES + SIZE_CASES + FIGURE_CASES


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
    check_case(case, scratch)


def check_case(case: Case, scratch: Path) -> None:
    """Run one row of a bad-input table (this one, test_bad_input_more.py's) and assert what it must say."""
    for name, content in case.files.items():
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if case.setup is not None:
        case.setup(scratch)
    ran = eyas(*case.argv, env=case.env)
    assert "Traceback" not in ran.output, ran.output
    assert ran.code == case.code, ran.output
    for phrase in case.says:
        assert phrase in ran.output, f"{phrase!r} missing from:\n{ran.output}"
    if case.code:  # refused: the problem and its fix in one paragraph, not spread over the output
        said = paragraph(ran.output, case.says[0])
        assert all(phrase in said for phrase in case.says), f"not in one paragraph:\n{ran.output}"
    if case.check is not None:
        case.check(scratch)


def paragraph(output: str, phrase: str) -> str:
    """The paragraph of `output` (lines between blank ones) that holds `phrase`."""
    return next(block for block in output.split("\n\n") if phrase in block)


# -- the local files an SSH host is opened with, where no config check came first (an IdentityFile of ~/.ssh/config,
# a Host built in code): `eyas verify`'s checks name the file and what it is, not "the binaries check broke" --


@dataclass(frozen=True)
class HostFiles:
    name: str
    says: tuple[str, ...]
    known_hosts: bytes | None = b""  # None: the case's setup makes ./kh
    key_file: str | None = None
    setup: Callable[[Path], None] | None = None


HOST_KNOWN_HOSTS_FIX = "Point known_hosts at a text file of the host keys you trust"
HOST_KEY_FIX = "Point key_file at the private key"
HOST_FILE_CASES = [
    HostFiles("known-hosts-not-text", ("known_hosts file kh", "is not text (not UTF-8 at byte 0)",
                                       HOST_KNOWN_HOSTS_FIX), known_hosts=b"\xff\xfe\x00\x01"),
    HostFiles("known-hosts-fifo", ("known_hosts file kh", "is a FIFO (named pipe)", HOST_KNOWN_HOSTS_FIX),
              known_hosts=None, setup=fifo("kh")),
    HostFiles("key-file-dev-zero", ("key file /dev/zero", "is a character device, not a regular file", HOST_KEY_FIX),
              key_file="/dev/zero"),
    HostFiles("key-file-fifo", ("key file pipe", "is a FIFO (named pipe)", HOST_KEY_FIX), key_file="pipe",
              setup=fifo("pipe")),
    HostFiles("key-file-link-loop", ("key file loop", "is a symbolic link that loops", HOST_KEY_FIX),
              key_file="loop", setup=link_loop("loop")),
    HostFiles("key-file-directory", ("key file keys", "is a directory, not a file", HOST_KEY_FIX), key_file="keys",
              setup=lambda root: (root / "keys").mkdir()),
]  # fmt: skip


@pytest.mark.parametrize("case", HOST_FILE_CASES, ids=[case.name for case in HOST_FILE_CASES])
def test_a_host_file_that_is_no_file_is_named_by_verify(case: HostFiles, scratch: Path) -> None:
    if case.known_hosts is not None:
        (scratch / "kh").write_bytes(case.known_hosts)
    if case.setup is not None:
        case.setup(scratch)
    # Port 1 of this machine: refused at once, were the files let through to a dial.
    host = SSHHost("gpu", "127.0.0.1", port=1, known_hosts="kh", key_file=case.key_file, connect_timeout=1.0)
    ctx = CheckContext(
        host=host,
        host_config=HostConfig(address="127.0.0.1", port=1, python="/usr/bin/python3", workdir=str(scratch)),
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m"),  # type: ignore[arg-type]
        http=HttpClient(),
        data_path=str(scratch),
    )
    (result,) = verify(ctx, ["binaries"]).results
    assert result.status is Status.FAIL
    assert "check broke" not in result.message and "\n" not in result.message, result.message
    for phrase in (*case.says, "for host 'gpu'"):
        assert phrase in result.message, f"{phrase!r} missing from: {result.message}"
