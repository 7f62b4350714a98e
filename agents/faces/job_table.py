"""The jobs of a run as a table's rows: each job's state and progress from the host (or the Ray cluster), a sharded
phase's total after its jobs. `eyas status` prints them; the chat's run status reads them."""

from __future__ import annotations

from typing import Any

from eyas.agents.faces.progress_text import count_text, detail_text
from eyas.graph.runs import RunDir
from eyas.graph.shard_total import phase_total
from eyas.tools.errors import HostError, JobError
from eyas.tools.hosts.connect import open_host
from eyas.tools.jobs.executor import jobs_of
from eyas.tools.jobs.job_progress import progress_in

BAR_WIDTH = 20  # characters of a progress bar


def job_rows(run: RunDir, state: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Each job with its progress, read where the run's executor keeps them (the host's detached jobs, or the Ray
    cluster's; not recorded: reading status is no part of the run), or why they could not be read (the host or
    the cluster is unreachable)."""
    if not state.get("jobs"):
        return [], None
    from eyas.graph.life.run_source import run_source  # the config's models: for a run with jobs only

    config = run_source(run.meta()).load()
    try:
        with open_host(config.target.host, config.host()) as host:
            jobs = jobs_of(config, None, host)
            rows = []
            for phase, ids in state["jobs"].items():
                phase_rows = []
                for job in jobs.statuses(ids):
                    cells = progress_cells(progress_in(jobs.tail(job.job_id, 20)))
                    phase_rows.append({"phase": phase, "job_id": job.job_id, "state": job.describe(), **cells})
                total = phase_total([row["progress"] for row in phase_rows])
                if total is not None:  # a sharded phase: its whole, after its jobs
                    phase_rows.append({"phase": phase, "job_id": f"all {total['jobs']} jobs", "state": "",
                                       **progress_cells(total)})  # fmt: skip
                rows += phase_rows
            return rows, None
    except (HostError, JobError) as exc:
        return [], str(exc)


def progress_cells(seen: dict[str, Any]) -> dict[str, Any]:
    """A progress bar with its count ('step 154/154'), the figures beside it (loss, tokens/s) and an ETA, from a job's
    progress lines (or a sharded phase's total of them)."""
    done, total = float(seen.get("done") or 0), float(seen.get("total") or 0)
    filled = int(BAR_WIDTH * done / total) if total else 0
    bar = f"{'█' * filled}{'░' * (BAR_WIDTH - filled)} {count_text(seen)}" if total else ""
    eta = f"{float(seen['eta_s']) / 60:.1f} min" if seen.get("eta_s") is not None else ""
    return {"bar": bar, "figures": detail_text(seen), "eta": eta, "progress": seen}
