"""Open a run: its folder, its config and policy as recorded at creation, and the live objects to drive it,
each crossing of the world recorded in the run's transcript."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.life.run_source import run_source
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir, new_run_id, run_dir
from eyas.tools.build_info import eyas_build
from eyas.tools.config_source import ConfigSource
from eyas.tools.errors import EyasError
from eyas.tools.hosts.connect import open_host
from eyas.tools.recording.recorder import Recorder
from eyas.tools.settings.config import EyasConfig, secret_values
from eyas.tools.settings.sizes import POLL_INTERVAL_S, Sizes


def run_meta(source: ConfigSource, policy: Policy | None, sizes: Sizes | None, **extra: Any) -> dict[str, Any]:
    """What a run needs to be resumed anywhere: the config's absolute path (or the embedded target), the
    policy and the sizes (none for a chat or research run); and which eyas created it."""
    embedded = source.embedded
    return {
        "config": str(source.path.resolve()) if source.path else None,
        "embedded": {"cache_dir": str(embedded.cache_dir), "port": embedded.port} if embedded else None,
        "policy": policy.model_dump() if policy else None,
        "sizes": sizes.model_dump() if sizes else None,
        "eyas": eyas_build(),
        **extra,
    }


def new_run(run_id: str | None = None) -> RunDir:
    """Where a new run goes: a valid id that no run has yet. Nothing is written: a pipeline run comes into being
    only once its config, host and transcript have opened (see `begin_run`)."""
    run = run_dir(new_run_id() if run_id is None else run_id)
    if run.meta_path.exists():
        raise EyasError(f"Run {run.run_id} exists already; continue it with `eyas resume {run.run_id}`.")
    return run


def begin_run(run: RunDir, meta: dict[str, Any]) -> RunDir:
    """Write the new run's meta (run.json): from now on `eyas runs` lists it and `eyas resume` continues it."""
    new_run(run.run_id).write_meta(meta)
    return run


def create_run(
    source: ConfigSource, policy: Policy | None, sizes: Sizes | None, *, run_id: str | None = None, **extra: Any
) -> RunDir:
    """A new chat or research run, whose config has loaded already: its folder with its meta."""
    return begin_run(new_run(run_id), run_meta(source, policy, sizes, **extra))


def open_recorder(run: RunDir, config: EyasConfig, transcript: Path | None = None) -> Recorder:
    """The run's transcript (appended to), with the config's secrets redacted from every event."""
    return Recorder.open(transcript or run.transcript, secret_values(config))


def initial_state(run: RunDir, config: EyasConfig, meta: dict[str, Any]) -> dict[str, Any]:
    artifacts = {"conversations": config.pipeline.conversations} if config.pipeline.conversations else {}
    # Which eyas runs it, in the run's input: the report states it, and a replay reads it from the transcript.
    return {"run_id": run.run_id, "eyas": meta.get("eyas"), "sizes": meta["sizes"], "artifacts": artifacts,
            "decisions": []}  # fmt: skip


@contextmanager
def open_context(run: RunDir, meta: dict[str, Any], **overrides: Any) -> Iterator[RunContext]:
    """The context of the run `meta` describes, every crossing recorded (appended to when it is resumed). The
    transcript opens last, so a config or host that fails to open leaves none behind."""
    config = run_source(meta).load()
    machine = open_host(config.target.host, config.host())
    recorder = open_recorder(run, config)
    host = recorder.host(machine)
    try:
        yield RunContext(
            config=config,
            host=host,
            http=recorder.http(),
            clock=recorder.clock(),
            run=run,
            boundary=recorder,
            policy=Policy.model_validate(meta["policy"]) if meta["policy"] else None,
            poll_interval_s=meta.get("poll_interval_s", POLL_INTERVAL_S),
            **overrides,
        )
    finally:
        host.close()
        recorder.close()
