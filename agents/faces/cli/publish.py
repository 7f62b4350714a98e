"""`eyas publish RUN --repo ORG/NAME`: upload a run's drafter folder to a Hugging Face hub repo, from the host."""

from __future__ import annotations

from typing import Annotated, Any, cast

import typer

from eyas.agents.faces.cli.completion import run_argument
from eyas.agents.faces.cli.console import json_result, say
from eyas.agents.faces.cli.flags import JsonOption
from eyas.graph.runs import open_run
from eyas.tools.hosts.connect import open_host
from eyas.tools.jobs.detached import Jobs
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.publish import (
    NoDrafter,
    Publication,
    check,
    follow,
    launch_once,
    publish_flags,
    publish_spec,
    token_secrets,
)
from eyas.tools.settings.units import format_size


def publish_command(
    run_id: Annotated[
        str,
        run_argument("the run whose trained drafter is uploaded (see `eyas runs`)"),
    ],
    repo: Annotated[str, typer.Option("--repo", help="the hub repo, ORG/NAME; created when it does not exist")],
    private: Annotated[
        bool, typer.Option("--private", help="make a new repo private (an existing repo keeps its visibility)")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="check on the host and print what would be uploaded, where; upload nothing"),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Upload the run's drafter to a Hugging Face hub repo: every file of its folder on the GPU host (config.json,
    the weights, its model card README.md when it has one, and what else training saved there), in one commit.

    The upload runs on the host, where the drafter is, with its ML environment's huggingface_hub, as a detached job
    that outlives a dropped SSH connection; eyas prints a line after each file and ends with the commit. A check on
    the host comes first (the repo id, the folder, the token's source, the files) and contacts no hub; --dry-run
    stops after it.

    The token needs write access to the repo's namespace. It comes from the environment variable that
    hub_token_env in the host's config section names, read here and given to the job by a file only its owner
    reads (removed once the job started), never on a command line or in any output; without hub_token_env, from
    the host's own HF_TOKEN or `hf auth login` there. The hub is hub_endpoint (HF_ENDPOINT) for a private hub or a
    mirror, else huggingface.co. A host whose config says hub_offline = true publishes nothing.

    \b
    Examples:
      eyas publish RUN --repo my-org/kimi-k2-eagle3 --dry-run   # the files and the target repo; nothing uploaded
      eyas publish RUN --repo my-org/kimi-k2-eagle3 --private
    """
    from eyas.graph.life.run_source import run_source
    from eyas.graph.life.run_view import read_run
    from eyas.graph.state import RunState

    run = open_run(run_id)
    state = cast(RunState, read_run(run).state)
    folder = (state.get("artifacts") or {}).get("drafter")
    if not folder:
        raise NoDrafter(
            f"Run {run.run_id} has no drafter yet: its training phase has not started (`eyas status {run.run_id}` "
            f"shows where it is). Publish once training has succeeded, e.g. `eyas resume {run.run_id}` first."
        )
    config = run_source(run.meta()).load()
    host_config = config.host()
    token_secrets(host_config)  # a token variable the config names but this shell lacks: said before the host
    message = f"Upload the EAGLE-3 drafter of eyas run {run.run_id}"
    with json_result(json_output) as out, open_host(config.target.host, host_config) as host:
        out.update(run_id=run.run_id, dry_run=dry_run)
        workloads = upload_workloads(host, host_config.workdir)
        flags = publish_flags(folder, repo, private, message, host_config.hub_token_env)
        planned = check(host, host_config, workloads, flags)
        describe(run.run_id, host.name, planned)
        out.update(planned.model_dump(exclude_none=True))
        if dry_run:
            say(f"dry run: nothing was uploaded; `eyas publish {run.run_id} --repo {repo}` uploads them.")
            return
        jobs = Jobs(host, host_config.workdir)
        job = launch_once(jobs, publish_spec(f"{run.run_id}.publish", host_config, workloads, flags))
        say(f"uploading as job {job.job_id} on {host.name} (`eyas jobs tail {job.job_id}` shows its log)")
        done = follow(jobs, job.job_id, show_progress)
        say(f"published {done.repo}: {done.commit_url or done.url}")
        out.update(done.model_dump(exclude_none=True), job_id=job.job_id)


def describe(run_id: str, host: str, planned: Publication) -> None:
    where = f"from {host}:{planned.folder} to {planned.endpoint.rstrip('/')}/{planned.repo}"
    say(f"eyas publish {run_id}: {len(planned.files)} files, {format_size(planned.bytes)}, {where}")
    width = max(len(item.path) for item in planned.files)
    for item in planned.files:
        say(f"  {item.path.ljust(width)}  {format_size(item.bytes)}")
    say(f"  token: {planned.token}")


def show_progress(line: dict[str, Any]) -> None:
    phase, done, total = line.get("phase"), line.get("done", 0), line.get("total", 0)
    if phase == "create":
        say(f"publish: creating the repo if absent; {format_size(total)} to upload")
    elif phase == "upload":
        say(f"publish: {line.get('files')} of {line.get('of')} files, {format_size(done)} of {format_size(total)}")
    elif phase == "commit":
        say(f"publish: all {line.get('of')} files sent; committing them")
