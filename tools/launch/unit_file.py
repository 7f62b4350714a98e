"""Read a systemd unit as `systemctl cat` prints it, to learn exactly how the running vLLM was started.

`systemctl cat` prints the unit file and then each drop-in, so reading the text top to bottom with systemd's
own override rules (an empty `ExecStart=` or `Environment=` resets) gives the effective service.
"""

import json
import posixpath
import shlex
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from eyas.tools.workloads.vllm_server import API_SERVER_MODULE

# ExecStart= may start with these special-execution prefixes (systemd.service(5)), in any combination.
_EXEC_PREFIXES = "-@:+!|"
_FLAG_ALIASES = {"tp": "tensor-parallel-size"}
# Words made only of these end a command in a shell script (operators, redirections).
_SHELL_PUNCTUATION = "();<>|&"


class VllmInvocation(BaseModel):
    """The vLLM server command line: the values eyas plans with, plus every flag exactly as given."""

    model_config = ConfigDict(frozen=True)

    executable: str
    model: str | None
    served_model_name: str | None
    tensor_parallel_size: int | None
    host: str | None
    port: int | None
    max_model_len: int | None
    speculative_config: dict[str, Any] | None
    flags: dict[str, str | bool]
    positional: list[str]


class UnitFile(BaseModel):
    """The effective [Service] settings of a unit after its drop-ins are applied."""

    model_config = ConfigDict(frozen=True)

    exec_start: list[str]
    environment: dict[str, str]
    environment_files: list[str]
    working_directory: str | None
    user: str | None
    vllm: VllmInvocation | None


def parse_unit_file(text: str) -> UnitFile:
    """Parse unit text (drop-ins included) into its effective [Service] settings.

    When several non-empty ExecStart= remain (Type=oneshot), the last one is the one reported.
    Raises ValueError when no ExecStart= is left in [Service], or when a value has unbalanced quotes.
    """
    exec_start: list[str] = []
    environment: dict[str, str] = {}
    environment_files: list[str] = []
    working_directory: str | None = None
    user: str | None = None
    for section, key, value in _assignments(text):
        if section != "Service":
            continue
        if key == "ExecStart":
            exec_start = _exec_argv(value) if value else []
        elif key == "Environment":
            environment = {**environment, **_environment_pairs(value)} if value else {}
        elif key == "EnvironmentFile":
            # A leading "-" only marks the file optional; it is never part of the (absolute) path.
            environment_files = [*environment_files, value.removeprefix("-")] if value else []
        elif key == "WorkingDirectory":
            working_directory = value.removeprefix("-") or None
        elif key == "User":
            user = value or None
    if not exec_start:
        raise ValueError("no ExecStart= in the [Service] section: this unit does not say what it runs")
    return UnitFile(
        exec_start=exec_start,
        environment=environment,
        environment_files=environment_files,
        working_directory=working_directory,
        user=user,
        vllm=parse_vllm_argv(exec_start),
    )


def parse_vllm_argv(argv: list[str]) -> VllmInvocation | None:
    """Find a vLLM server launch in argv (`vllm serve`, `python -m ...api_server`, or either inside a
    `sh -c` script) and parse its arguments; None when argv does not start vLLM."""
    candidates = [argv, *(_shell_words(word) for word in argv if len(word.split()) > 1)]
    found = next((hit for words in candidates if (hit := _find_vllm(words))), None)
    if found is None:
        return None
    executable, arguments, is_serve = found
    given, positional = _parse_arguments(arguments)
    # vLLM accepts --max_model_len as well as --max-model-len; a later repeat wins, as with argparse.
    named: dict[str, str | bool] = {}
    for flag, value in given:
        key = flag.lstrip("-").replace("_", "-")
        named[_FLAG_ALIASES.get(key, key)] = value

    def text(name: str) -> str | None:
        value = named.get(name)
        return value if isinstance(value, str) else None

    # `vllm serve` lets its positional model override --model.
    model = positional[0] if is_serve and positional else text("model")
    return VllmInvocation(
        executable=executable,
        model=model,
        served_model_name=text("served-model-name"),
        tensor_parallel_size=_integer(text("tensor-parallel-size")),
        host=text("host"),
        port=_integer(text("port")),
        max_model_len=_integer(text("max-model-len")),
        speculative_config=_json_object(text("speculative-config")),
        flags=dict(given),
        positional=positional,
    )


def _assignments(text: str) -> Iterator[tuple[str, str, str]]:
    """Yield (section, key, value) for each assignment, backslash-continued lines joined."""
    section = ""
    for line in _logical_lines(text):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif "=" in line:
            key, _, value = line.partition("=")
            yield section, key.strip(), value.strip()


def _logical_lines(text: str) -> Iterator[str]:
    # systemd joins a line ending in "\" with the next one, skipping comment lines in between.
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield (pending + line).strip()
        pending = ""
    if pending:
        yield pending.strip()


def _exec_argv(value: str) -> list[str]:
    command = value.lstrip(_EXEC_PREFIXES)
    argv = _split(command, "ExecStart")
    # With "@", the second word is the argv[0] handed to the binary, not an argument.
    if "@" in value[: len(value) - len(command)] and len(argv) > 1:
        del argv[1]
    return argv


def _environment_pairs(value: str) -> dict[str, str]:
    # Words without "=" are invalid assignments, which systemd ignores too.
    pairs = (word.partition("=") for word in _split(value, "Environment"))
    return {key: val for key, equals, val in pairs if key and equals}


def _split(value: str, key: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as error:
        raise ValueError(f"{key}= value cannot be split into words ({error}): {value!r}") from None


def _shell_words(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return []


def _find_vllm(argv: list[str]) -> tuple[str, list[str], bool] | None:
    """Return (executable, its arguments, whether it is `vllm serve`) for the first vLLM launch in argv."""
    for index, word in enumerate(argv):
        following = argv[index + 1 : index + 2]
        if posixpath.basename(word) == "vllm" and following == ["serve"]:
            return word, _until_shell_operator(argv[index + 2 :]), True
        if word == "-m" and following == [API_SERVER_MODULE]:
            pythons = [w for w in argv[:index] if posixpath.basename(w).startswith("python")]
            return (pythons or argv[:1])[-1], _until_shell_operator(argv[index + 2 :]), False
    return None


def _until_shell_operator(words: list[str]) -> list[str]:
    for index, word in enumerate(words):
        if word and not word.strip(_SHELL_PUNCTUATION):
            # `2>&1` lexes as "2", ">&", "1": the descriptor number is part of the redirection.
            redirected_fd = word[0] in "<>" and index > 0 and words[index - 1].isdigit()
            return words[: index - 1 if redirected_fd else index]
    return words


def _parse_arguments(arguments: list[str]) -> tuple[list[tuple[str, str | bool]], list[str]]:
    """Split arguments into (flag, value) pairs in order (`--f v`, `--f=v`, bare `--f` -> True) and
    positionals."""
    flags: list[tuple[str, str | bool]] = []
    positional: list[str] = []
    index = 0
    while index < len(arguments):
        word = arguments[index]
        index += 1
        if not _is_flag(word):
            positional.append(word)
            continue
        name, equals, value = word.partition("=")
        if equals:
            flags.append((name, value))
        elif index < len(arguments) and not _is_flag(arguments[index]):
            flags.append((name, arguments[index]))
            index += 1
        else:
            flags.append((name, True))
    return flags, positional


def _is_flag(word: str) -> bool:
    if not word.startswith("-") or word == "-":
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False  # a negative number is a value, not a flag


def _integer(value: str | None) -> int | None:
    # Values like "$PORT" (expanded by systemd at start) are not known here: None, raw kept in flags.
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _json_object(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None
