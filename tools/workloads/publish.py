#!/usr/bin/env python3
"""Upload a trained drafter's folder to a Hugging Face hub repo, as it is (config, weights, model card).

Run on the GPU host, where the drafter is, by the ML environment's interpreter (huggingface_hub, which vLLM
installs):

    python publish.py --folder /data/eyas/runs/RUN/drafter --repo my-org/kimi-k2-eagle3 --dry-run
    HF_TOKEN=... python publish.py --folder /data/eyas/runs/RUN/drafter --repo my-org/kimi-k2-eagle3

Every file of the folder goes up (names starting with "." are tool markers, not the model, and stay), in one
commit to the repo's main branch; the repo is created when it does not exist (--private for a new one; an
existing repo keeps its visibility). Each file is uploaded ahead of the commit, so a progress line follows
every file, and running it again after a failure skips the large files the hub already holds.

The token: the environment variable --token-env names (eyas fills it from a file only the job's owner reads,
never a command line), else huggingface_hub's own (HF_TOKEN, or `hf auth login` on this host). It is never
printed. HF_ENDPOINT chooses the hub (a private hub or mirror); HF_HUB_OFFLINE=1 (hub_offline = true in the
host's eyas config) refuses at once.

--dry-run checks the same things, contacts no hub and prints what would be uploaded. Either way the last line
is one JSON object. Exit codes: 0 done, 1 the upload failed, 2 bad arguments (the repo id, offline, no token),
3 the folder holds no drafter (yet).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

# Exit codes, as the docstring says. eyas imports them from here (tools/publish.py), so the workload's own modules
# (progress, download, drafter_format: found beside it on the host) are imported where they are used.
FAILED, REFUSED, NO_DRAFTER = 1, 2, 3


class Refusal(Exception):
    """Why nothing was uploaded, in one paragraph, and the exit code that says which kind of reason."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def drafter_files(folder: Path) -> list[Path]:
    """The files to upload, relative to `folder`; refuses a folder without a drafter's config and weights."""
    from drafter_format import weight_files

    if not folder.is_dir():
        raise Refusal(f"{folder} does not exist on this host: the drafter has not been saved (yet).", NO_DRAFTER)
    if not (folder / "config.json").is_file() or weight_files(folder) is None:
        raise Refusal(
            f"{folder} holds no saved drafter (config.json and model.safetensors, or a sharded index): its training "
            "has not finished, or failed.",
            NO_DRAFTER,
        )
    files = (path.relative_to(folder) for path in folder.rglob("*") if path.is_file())
    return sorted(path for path in files if not any(part.startswith(".") for part in path.parts))


def check_repo_id(repo: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as exc:
        raise Refusal(
            f"{repo!r} is not a hub repo id: {exc} Give it as org/name, e.g. my-org/my-drafter.", REFUSED
        ) from None
    if "/" not in repo:
        raise Refusal(f"{repo!r} names no owner: give the repo as org/name (or user/name).", REFUSED)


def token_source(token_env: str | None, *, dry_run: bool) -> tuple[str | None, str]:
    """The token to send (None: huggingface_hub's own) and where it comes from, in words; refuses when none. A dry
    run is not given the token eyas sends (eyas checks that it has one)."""
    from huggingface_hub import get_token

    if token_env:
        token = os.environ.get(token_env)
        if not token and not dry_run:
            raise Refusal(f"--token-env names {token_env}, which is not set in this job's environment.", REFUSED)
        return token, f"${token_env}, sent by eyas"
    if get_token() is None:
        raise Refusal(
            "No hub token: set hub_token_env in the host's section of the eyas config to the name of an environment "
            "variable holding a token with write access (eyas sends it to the job by an owner-only file), or set "
            "HF_TOKEN (or run `hf auth login`) on this host.",
            REFUSED,
        )
    return None, "the host's own (HF_TOKEN or `hf auth login`)"


def check_online(endpoint: str, connect_timeout: float, *, dry_run: bool) -> None:
    from huggingface_hub import constants

    from download import reachable

    if constants.HF_HUB_OFFLINE:
        raise Refusal(
            "HF_HUB_OFFLINE is set, so nothing can be uploaded from this host: eyas sets it for a host whose config "
            "says hub_offline = true ([hosts.<name>] in the eyas config). Where this host may reach the hub, set "
            "hub_offline = false; otherwise copy the drafter's folder to a machine that can and upload it from there "
            "(`hf upload ORG/NAME FOLDER`).",
            REFUSED,
        )
    problem = None if dry_run else reachable(endpoint, connect_timeout)
    if problem:
        raise Refusal(f"The hub at {endpoint} cannot be reached ({problem}); check the network or HF_ENDPOINT.", FAILED)


def upload(args: argparse.Namespace, folder: Path, files: list[Path], token: str | None) -> dict[str, Any]:
    """The repo (created if absent), every file uploaded ahead of one commit, a progress line after each."""
    from huggingface_hub import CommitOperationAdd, HfApi

    import progress

    api = HfApi(token=token)
    total = sum((folder / path).stat().st_size for path in files)
    progress.emit(phase="create", done=0, total=total, unit="bytes", files=0, of=len(files))
    url = api.create_repo(args.repo, private=args.private or None, exist_ok=True)
    operations, done = [], 0
    for count, path in enumerate(files, 1):
        operation = CommitOperationAdd(path_in_repo=path.as_posix(), path_or_fileobj=folder / path)
        api.preupload_lfs_files(args.repo, additions=[operation])
        operations.append(operation)
        done += (folder / path).stat().st_size
        progress.emit(phase="upload", done=done, total=total, unit="bytes", files=count, of=len(files))
    progress.emit(phase="commit", done=total, total=total, unit="bytes", files=len(files), of=len(files))
    commit = api.create_commit(args.repo, operations=operations, commit_message=args.message)
    return {"url": str(url), "commit": commit.oid, "commit_url": commit.commit_url}


def failure(exc: Exception, repo: str) -> Refusal:
    """What the hub said, in words, with what to do about it."""
    from huggingface_hub.errors import HfHubHTTPError

    status = exc.response.status_code if isinstance(exc, HfHubHTTPError) and exc.response is not None else None
    if status in (401, 403):
        return Refusal(
            f"The hub refused the token for {repo} (HTTP {status}): it is invalid, or has no write access to that "
            "namespace. Use a token with write access (hub_token_env in the eyas config, or HF_TOKEN on the host).",
            FAILED,
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Refusal(f"Uploading to {repo} failed ({type(exc).__name__}: {first}); run it again to resume.", FAILED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, required=True, help="the drafter's folder (speculators' format)")
    parser.add_argument("--repo", required=True, help="the hub repo, org/name (created when absent)")
    parser.add_argument("--token-env", help="environment variable holding the token (default: HF_TOKEN or login)")
    parser.add_argument("--private", action="store_true", help="make a new repo private (an existing one is kept)")
    parser.add_argument("--message", default="Upload EAGLE-3 drafter", help="the commit message")
    parser.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to reach the hub (default 5)")
    parser.add_argument("--dry-run", action="store_true", help="check and list what would be uploaded; upload nothing")
    args = parser.parse_args()
    from huggingface_hub import constants

    folder = args.folder.resolve()
    try:
        check_repo_id(args.repo)
        check_online(constants.ENDPOINT, args.connect_timeout, dry_run=args.dry_run)
        files = drafter_files(folder)
        token, source = token_source(args.token_env, dry_run=args.dry_run)
        result: dict[str, Any] = {
            "repo": args.repo, "endpoint": constants.ENDPOINT, "folder": str(folder), "token": source,
            "files": [{"path": path.as_posix(), "bytes": (folder / path).stat().st_size} for path in files],
        }  # fmt: skip
        result["bytes"] = sum(entry["bytes"] for entry in result["files"])
        if not args.dry_run:
            try:
                result.update(upload(args, folder, files, token))
            except Exception as exc:  # HfHubHTTPError, OSError and the HTTP library's own errors
                raise failure(exc, args.repo) from None
    except Refusal as refusal:
        print(f"publish.py: {refusal}", file=sys.stderr, flush=True)
        raise SystemExit(refusal.code) from None
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
