#!/usr/bin/env python3
"""Print the --help of the command line tools installed in this Python environment, as JSON.

Run by the target environment's interpreter, so the help is that of the versions which will really run
(documentation written for another version is the classic way to pass a flag that does not exist):

    python cli_help.py --module "vllm.entrypoints.openai.api_server --help=all" --dist speculators \
        --cache-dir ~/.cache/help

--module "M [ARGS]"  the help of `python -m M --help`, or of `python -m M ARGS` when ARGS are given
--dist D     the help of every console script of distribution D, and of each of its subcommands
             (click and typer apps), e.g. `speculators train --help`

Everything runs in this one process, so heavy imports (torch, vllm) are paid once; expect 10-30 s.
The help of an installed version never changes: with --cache-dir each tool's help is kept in a file
named after its distribution and version and read from there next time.

Output (stdout): {"commands": {"speculators train --help": "usage: ..."}, "versions": {"speculators": "0.9.0"},
"problems": ["..."]}. A tool that cannot be found or fails is a problem, not a crash. Exit 0, or 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata as metadata
import io
import json
import os
import re
import runpy
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

_BOX = re.compile(r"[╭╮╰╯─│┃━┏┓┗┛]")


def captured(run: Callable[[], Any]) -> str:
    """What `run` prints (stdout and stderr) until it returns or exits, as plain text."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), contextlib.suppress(SystemExit):
        run()
    lines = (_BOX.sub(" ", line).rstrip() for line in buffer.getvalue().splitlines())
    return "\n".join(line for line in lines if line.strip())


def dist_of_module(module: str) -> tuple[str, str] | None:
    names = metadata.packages_distributions().get(module.split(".")[0], [])
    for name in names:
        return name, metadata.version(name)
    return None


def module_help(module: str, args: list[str]) -> str:
    return invoked([module, *args], partial(runpy.run_module, module, run_name="__main__", alter_sys=True))


def click_command(entry: Any) -> Any:
    """The click command behind an entry point: a typer app, a click command, or a main() function whose
    module keeps its app as `app` (a common typer layout); None for anything else."""
    if type(entry).__name__ == "Typer":
        import typer.main

        return typer.main.get_command(entry)
    if hasattr(entry, "main") and hasattr(entry, "params"):
        return entry
    module = sys.modules.get(getattr(entry, "__module__", "") or "")
    app = getattr(module, "app", None)
    return click_command(app) if app is not None and app is not entry else None


def dist_help(dist: str) -> dict[str, str]:
    helps: dict[str, str] = {}
    for point in metadata.distribution(dist).entry_points:
        if point.group != "console_scripts":
            continue
        entry = point.load()
        command = click_command(entry)
        if command is None:
            helps[f"{point.name} --help"] = invoked([point.name, "--help"], entry)
            continue
        for args in [[], *([sub] for sub in sorted(getattr(command, "commands", {})))]:
            argv = [point.name, *args, "--help"]
            helps[" ".join(argv)] = invoked(argv, partial(command.main, argv[1:], prog_name=point.name))
    return helps


def invoked(argv: list[str], run: Callable[[], Any]) -> str:
    """The help `run` prints, with sys.argv as a shell would set it (argparse-based commands read it)."""

    def with_argv() -> None:
        sys.argv = argv
        run()

    return captured(with_argv)


def cached(cache_dir: Path | None, key: str, compute: Callable[[], dict[str, str]]) -> dict[str, str]:
    path = cache_dir / f"{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.json" if cache_dir else None
    if path is not None and path.is_file():
        return json.loads(path.read_text())
    helps = compute()
    if path is not None and helps:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(helps))
        tmp.replace(path)
    return helps


def collect(modules: list[str], dists: list[str], cache_dir: Path | None) -> dict[str, Any]:
    commands: dict[str, str] = {}
    versions: dict[str, str] = {}
    problems: list[str] = []
    for spec in modules:
        module, *args = spec.split()
        args = args or ["--help"]
        owner = dist_of_module(module)
        if owner is None:
            problems.append(f"{module}: no installed distribution provides it in {sys.executable}")
            continue
        versions[owner[0]] = owner[1]
        line = " ".join(["python -m", module, *args])
        try:
            found = cached(
                cache_dir, f"module-{line}-{owner[1]}", lambda m=module, a=args, k=line: {k: module_help(m, a)}
            )
            commands.update(found)
        except Exception as exc:  # a broken install is a finding about the host
            problems.append(f"{line} failed: {type(exc).__name__}: {exc}")
    for dist in dists:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            problems.append(f"{dist}: not installed in {sys.executable}")
            continue
        versions[dist] = version
        try:
            commands.update(cached(cache_dir, f"dist-{dist}-{version}", lambda d=dist: dist_help(d)))
        except Exception as exc:
            problems.append(f"{dist} --help failed: {type(exc).__name__}: {exc}")
    return {"commands": commands, "versions": versions, "problems": problems}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--module", action="append", default=[], help='a module run as `python -m M --help` ("M ARGS": with ARGS)'
    )
    parser.add_argument("--dist", action="append", default=[], help="a distribution whose console scripts to ask")
    parser.add_argument("--cache-dir", type=Path, help="keep each tool's help here, by distribution and version")
    args = parser.parse_args()
    if not args.module and not args.dist:
        parser.error("name at least one --module or --dist (for example --dist speculators)")
    # Plain, wide help text from rich/typer; no colour codes.
    os.environ.update(COLUMNS="120", NO_COLOR="1", TERM="dumb")
    result = collect(args.module, args.dist, args.cache_dir.expanduser() if args.cache_dir else None)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
