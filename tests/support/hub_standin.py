"""A stand-in Hugging Face hub on 127.0.0.1: the endpoints huggingface_hub's snapshot_download asks for a model repo,
and those its create_repo and upload_folder (create_commit) write to.

Stand-in: the tests have no internet, and the hub cannot be made to serve a tiny drafter of the right shape on
demand. It serves each repo it is given (a local directory, its files at the top level) as huggingface_hub 2.x
reads one; point HF_ENDPOINT at `HubStandin.url`:

    GET  /api/models/{repo}[/revision/{revision}]    model info: `sha` (the commit) and `siblings`
    GET  /api/models/{repo}/tree/{revision}           the files (one page), `oid`, `size` and `lfs` for safetensors
    HEAD /{repo}/resolve/{revision}/{file}            X-Repo-Commit, ETag (the sha256) and Content-Length
    GET  /{repo}/resolve/{revision}/{file}            the bytes

An unknown repo, revision or file is a 404 with the X-Error-Code the hub sends (RepoNotFound, RevisionNotFound,
EntryNotFound), and a repo in `gated` a 403 with GatedRepo (the hub's answer without an accepted token), which
huggingface_hub turns into its own errors. Every request's method and path is kept in
`requests`, so a test can tell that nothing reached the hub.

Writes (huggingface_hub 2.4), each answered only with `Authorization: Bearer <token>` when the stand-in has a token
(else 401), every Authorization header kept in `authorizations`:

    POST /api/repos/create                            {name, organization}: the repo's url (409 when it exists)
    POST /api/validate-yaml                           a README.md's metadata: always valid here
    POST /api/models/{repo}/preupload/{revision}      the upload mode of each file: "regular" for every one
    POST /api/models/{repo}/commit/{revision}         NDJSON: a header line, then one line per file, its bytes
                                                      inline in base64; they are kept in `received[repo][path]`

Only the inline path is served: the real hub sends "lfs" for *.safetensors and large files, which the client then
uploads through the LFS batch API or Xet before the commit; an "lfsFile" line here is a 400. Tests that upload keep
their files small, which is all that keeps a commit inline here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

REVISION = "main"


@dataclass
class HubStandin:
    url: str
    repos: dict[str, Path]
    token: str | None = None
    requests: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    received: dict[str, dict[str, bytes]] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)


def commit_of(directory: Path) -> str:
    """A 40-hex commit id that changes when any file does, as a git commit would."""
    digest = hashlib.sha1()
    for path in sorted(directory.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def tree_entry(path: Path) -> dict[str, object]:
    data = path.read_bytes()
    entry: dict[str, object] = {"type": "file", "path": path.name, "size": len(data)}
    entry["oid"] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id
    if path.suffix == ".safetensors":  # stored in LFS on the hub
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return entry


@contextmanager
def hub_standin(
    repos: dict[str, Path], token: str | None = None, gated: set[str] | None = None
) -> Iterator[HubStandin]:
    """Serve `repos` (repo id -> directory) on a free port until the block ends; writes need `token` when given;
    the repos in `gated` are refused as a gated repo is to a token that has not accepted its terms."""
    hub = HubStandin(url="", repos=repos, token=token, gated=gated or set())

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False):
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _missing(self, code: str, message: str, head: bool, status: int = 404) -> None:
            body = json.dumps({"error": message}).encode()
            self._send(status, body, {"X-Error-Code": code, "X-Error-Message": message}, head)

        def _json(self, value: object) -> None:
            self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def _api(self, rest: str) -> None:
            repo = next((repo for repo in hub.repos if rest == repo or rest.startswith(repo + "/")), None)
            if repo is None:
                return self._missing("RepoNotFound", "Repository not found", False)
            directory = hub.repos[repo]
            files = sorted(path for path in directory.iterdir() if path.is_file())
            commit = commit_of(directory)
            action, _, revision = rest[len(repo) + 1 :].partition("/")
            if action and unquote(revision) not in (REVISION, commit):
                return self._missing("RevisionNotFound", f"Invalid rev id: {unquote(revision)}", False)
            if action == "tree":
                return self._json([tree_entry(path) for path in files])
            siblings = [{"rfilename": path.name} for path in files]
            self._json({"id": repo, "modelId": repo, "sha": commit, "private": False, "siblings": siblings})

        def _resolve(self, repo: str, revision: str, name: str, head: bool) -> None:
            directory = hub.repos.get(repo)
            if directory is None:
                return self._missing("RepoNotFound", "Repository not found", head)
            commit = commit_of(directory)
            if revision not in (REVISION, commit):
                return self._missing("RevisionNotFound", f"Invalid rev id: {revision}", head)
            path = directory / name
            if "/" in name or not path.is_file():
                return self._missing("EntryNotFound", f"{name} does not exist", head)
            data = path.read_bytes()
            headers = {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
            self._send(200, data, {**headers, "Content-Type": "application/octet-stream"}, head)

        def _answer(self, head: bool) -> None:
            hub.requests.append(f"{self.command} {self.path}")
            path = urlsplit(self.path).path
            if any(f"/{repo}/" in f"{path}/" for repo in hub.gated):
                return self._missing("GatedRepo", "Access to this model is restricted", head, status=403)
            if path.startswith("/api/models/"):
                return self._api(path[len("/api/models/") :])
            parts = path.lstrip("/").split("/")
            if len(parts) >= 5 and parts[2] == "resolve":
                repo, revision, name = f"{parts[0]}/{parts[1]}", unquote(parts[3]), unquote("/".join(parts[4:]))
                return self._resolve(repo, revision, name, head)
            self._send(404, b"{}", head=head)

        def _write(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            authorization = self.headers.get("Authorization") or ""
            hub.authorizations.append(authorization)
            if hub.token is not None and authorization != f"Bearer {hub.token}":
                return self._send(401, b'{"error": "Invalid credentials"}', {"X-Error-Message": "Invalid credentials"})
            path = urlsplit(self.path).path
            if path == "/api/repos/create":
                fields = json.loads(body)
                repo = f"{fields['organization']}/{fields['name']}" if fields.get("organization") else fields["name"]
                if repo in hub.created:  # the hub's answer names the repo's url; create_repo(exist_ok=True) reads it
                    conflict = {"error": "You already created this model repo", "url": f"{hub.url}/{repo}"}
                    return self._send(409, json.dumps(conflict).encode())
                hub.created.append(repo)
                return self._json({"url": f"{hub.url}/{repo}", "name": repo})
            if path == "/api/validate-yaml":
                return self._json({"errors": [], "warnings": []})
            repo, _, action = path.removeprefix("/api/models/").rpartition("/")[0].rpartition("/")
            if repo not in hub.created:
                return self._missing("RepoNotFound", "Repository not found", False)
            if action == "preupload":
                files = json.loads(body)["files"]
                modes = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
                return self._json({"files": modes})
            if action == "commit":
                return self._commit(repo, [json.loads(line) for line in body.splitlines() if line.strip()])
            self._send(404, b"{}")

        def _commit(self, repo: str, lines: list[dict[str, object]]) -> None:
            if any(line["key"] != "file" for line in lines[1:]):
                return self._send(400, b'{"error": "the stand-in takes inline files only"}')
            for line in lines[1:]:
                value = line["value"]
                assert isinstance(value, dict) and value["encoding"] == "base64"
                hub.received.setdefault(repo, {})[value["path"]] = base64.b64decode(value["content"])
            commit = hashlib.sha1(json.dumps(lines).encode()).hexdigest()
            self._json({"commitUrl": f"{hub.url}/{repo}/commit/{commit}", "commitOid": commit})

        def do_POST(self) -> None:
            hub.requests.append(f"POST {self.path}")
            self._write()

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
