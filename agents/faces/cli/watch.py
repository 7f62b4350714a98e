"""`eyas watch [RUN]`: keep runs driven overnight (graph/life/watch.py), in a loop or as a systemd user service."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from eyas.agents.faces.cli.completion import run_argument
from eyas.agents.faces.cli.console import console, json_result
from eyas.agents.faces.cli.options import positive_seconds
from eyas.graph.life.heartbeat import HEARTBEAT_INTERVAL_S
from eyas.graph.life.watch import MAX_RESTARTS, SETTLED, Condition, Watcher
from eyas.graph.run_damage import Damage, read_undamaged
from eyas.graph.runs import RunDir, list_runs, run_dir, runs_root
from eyas.tools.errors import NotFound
from eyas.tools.private_files import private_dir

UNIT_NAME = "eyas-watch.service"
WATCH_ENV_IN_HOME = ".config/eyas/watch.env"  # `%h/...` in the unit, ~/... for the operator


def _say(message: str) -> None:
    console.print(f"{time.strftime('%H:%M:%S')} {message}", markup=False, highlight=False, soft_wrap=True)


def watch_command(
    run_id: Annotated[
        str | None,
        run_argument("the run to watch (default: every run in the runs folder)"),
    ] = None,
    interval: Annotated[
        float, typer.Option(help="seconds between looks", callback=positive_seconds)
    ] = HEARTBEAT_INTERVAL_S,
    max_restarts: Annotated[int, typer.Option(help="most restarts per run before a person is asked")] = MAX_RESTARTS,
    notify_command: Annotated[
        str | None, typer.Option(help="told what needs a person (default: the notify_command of each run's policy)")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="look once and exit (for cron)")] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="with --once: print what it found of each run as JSON")
    ] = False,
    install_unit: Annotated[
        bool,
        typer.Option(
            "--install-unit",
            help=f"write a systemd user unit, ~/.config/systemd/user/{UNIT_NAME}, that "
            "runs this watch at boot, and print how to enable it; watches nothing now",
        ),
    ] = False,
) -> None:
    """Keep runs driven: a driver whose heartbeat stopped without a last word (OOM, reboot, kill -9) is resumed
    as a detached driver (`eyas resume --detach`), a frozen one it started is stopped first, never a second driver
    while one is alive. Whatever needs a person (a driver that ended with an error, too many restarts) goes to the
    notify command. With RUN it exits once that run needs no watching (it ended, or stopped at a gate)."""
    if install_unit:
        path = write_unit(run_id, interval, notify_command)
        typer.echo(f"wrote {path}")
        typer.echo(
            "enable it (and let it run while you are logged out):\n"
            f"  systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}\n"
            "  loginctl enable-linger $USER\n"
            f"the drivers it starts also get ~/{WATCH_ENV_IN_HOME} (NAME=value lines: the agent's API key, a "
            "key passphrase)\n"
            f"follow it with: journalctl --user -u {UNIT_NAME} -f"
        )
        return
    if json_output and not once:
        raise typer.BadParameter("--json goes with --once (a watch that keeps looking says what it does as it goes)")
    with json_result(json_output) as result:
        watch_runs(Watcher(say=_say, notify_command=notify_command, max_restarts=max_restarts), run_id, interval,
                   once, result)  # fmt: skip


NO_RUNS = "no run here has a driver to watch yet (`eyas run` and `eyas resume` start one)"


def watch_runs(watcher: Watcher, run_id: str | None, interval: float, once: bool, result: dict[str, Any]) -> None:
    """Look at the runs every `interval` seconds; `result["runs"]` holds what the last look found of each."""
    only = watched_run(run_id) if run_id else None
    _say(f"watching {only.run_id if only else f'the runs in {runs_root()}'} every {interval:g} s")
    told: set[str] = set()  # each damage is said once, not at every look
    seen: dict[str, Condition] = {}  # each run's condition is said when first seen and when it changes
    while True:
        look: list[dict[str, str]] = []
        result["runs"] = look
        watched = [only] if only else _watchable()
        if not watched and NO_RUNS not in told:
            told.add(NO_RUNS)
            _say(NO_RUNS)
        for run in watched:
            found = read_undamaged(run, watcher.tend)  # a damaged run never stops the watch of the others
            if isinstance(found, Damage):
                look.append({"run": run.run_id, "damage": found.text()})
                if found.text() not in told:
                    told.add(found.text())
                    _say(f"{found.text()} eyas watch leaves it alone until then.")
                continue
            look.append({"run": run.run_id, "condition": found.condition.value, "detail": found.detail,
                         "driver": found.driver_id})  # fmt: skip
            if only is not None and found.condition in SETTLED:
                _say(f"run {run.run_id}: {found.condition.value} ({found.detail}); nothing more to watch")
                return
            if seen.get(run.run_id) is not found.condition:
                seen[run.run_id] = found.condition
                _say(f"run {run.run_id}: {found.condition.value} ({found.detail})")
        if once:
            return
        time.sleep(interval)


def watched_run(run_id: str) -> RunDir:
    """The run's folder; a run just started with --detach may not have written its run.json yet."""
    run = run_dir(run_id)
    if not run.root.is_dir():
        raise NotFound(f"There is no run '{run_id}' in {run.root.parent}; `eyas runs` lists the runs there.")
    return run


def _watchable() -> list[RunDir]:
    """The runs a driver has beaten for: the others were never driven by an eyas that can be watched."""
    return [run for run in list_runs() if (run.root / "heartbeat.json").exists()]


def unit_text(run_id: str | None, interval: float, notify_command: str | None) -> str:
    """A user unit that runs `eyas watch` with this interpreter and this runs folder, restarted if it dies."""
    argv = [sys.executable, "-m", "eyas", "watch", "--interval", f"{interval:g}"]
    if notify_command:
        argv += ["--notify-command", notify_command]
    if run_id:
        argv.append(run_id)
    # systemd expands `%` and `$` itself: doubled, they reach eyas as written.
    exec_start = shlex.join(argv).replace("%", "%%").replace("$", "$$")
    return "\n".join([
        "# Written by `eyas watch --install-unit`: restarts eyas drivers whose heartbeat stopped.",
        "[Unit]",
        "Description=eyas watch: keep eyas runs driven",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={Path.cwd()}",
        f'Environment="EYAS_RUNS_DIR={runs_root()}"',
        # What the drivers need from the environment (the agent's API key, a key's passphrase), one NAME=value a line.
        f"EnvironmentFile=-%h/{WATCH_ENV_IN_HOME}",
        f"ExecStart={exec_start}",
        "Restart=always",
        "RestartSec=30",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])  # fmt: skip


def unit_path() -> Path:
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config_home / "systemd" / "user" / UNIT_NAME


def write_unit(run_id: str | None, interval: float, notify_command: str | None) -> Path:
    path = unit_path()
    private_dir(path.parent)
    path.write_text(unit_text(run_id, interval, notify_command))
    return path
