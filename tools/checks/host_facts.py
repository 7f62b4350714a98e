"""Host-grounded facts for research: the versions installed on the target host, the --help of its vllm and
speculators, and a search of the documentation installed with its packages.

Advice is only as good as the version it was written for: these facts let the research check a flag or
a subcommand against the tools that will really run.
"""

from __future__ import annotations

import re
import shlex
import sys

from pydantic import BaseModel, Field

from eyas.tools.checks.json_output import last_json
from eyas.tools.checks.packages import check_packages
from eyas.tools.checks.result import CheckContext
from eyas.tools.errors import EyasError
from eyas.tools.hosts.host import Host, wrap_timeout
from eyas.tools.hosts.http import HttpClient
from eyas.tools.jobs.upload import upload_workloads, workload_path
from eyas.tools.settings.config import HostConfig, TargetConfig
from eyas.tools.web.search import Origin, SearchHit

# --help=all: every flag with its description and default (plain --help lists only the flag names).
VLLM_SERVER_HELP = "vllm.entrypoints.openai.api_server --help=all"
HELP_TIMEOUT_S = 240.0  # importing vllm and torch on a busy host; the result is cached by version after
DOCS_TIMEOUT_S = 60.0


class HostFacts(BaseModel):
    host: str
    python: str
    versions: dict[str, str | None] = Field(default_factory=dict)
    help: dict[str, str] = Field(default_factory=dict, description="command line -> its --help text")
    workloads_dir: str | None = None
    problems: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """One line a prompt can carry: what is installed where."""
        installed = ", ".join(f"{name} {version}" for name, version in self.versions.items() if version)
        missing = [name for name, version in self.versions.items() if not version]
        text = f"host '{self.host}', {self.python}: {installed or 'no versions known'}"
        return text + (f"; not installed: {', '.join(missing)}" if missing else "")

    def merged(self, other: HostFacts) -> HostFacts:
        return self.model_copy(
            update={
                "versions": {**self.versions, **other.versions},
                "help": {**self.help, **other.help},
                "workloads_dir": self.workloads_dir or other.workloads_dir,
                "problems": [*self.problems, *other.problems],
            }
        )


def installed_versions(host: Host, host_config: HostConfig, target: TargetConfig, http: HttpClient) -> HostFacts:
    """vllm, speculators, torch and transformers as the host's ML interpreter sees them (about a second)."""
    facts = HostFacts(host=host.name, python=host_config.python)
    context = CheckContext(host=host, host_config=host_config, target=target, http=http, data_path=host_config.workdir)
    packages = check_packages(context)
    facts.versions = {key: value for key, value in packages.facts.items() if key != "python"}
    if not packages.facts:
        facts.problems.append(f"installed versions unknown: {packages.message}")
    return facts


def read_cli_help(
    host: Host, host_config: HostConfig, *, dists: tuple[str, ...] = ("speculators",), inline: bool = False
) -> HostFacts:
    """The --help of the host's vllm server and of `dists`' commands: 10-30 s the first time, then cached on the
    host by version (cli_help.py does that, so a person running it by hand gets the same). `inline` sends the
    script with the command instead of uploading the workloads (a check writes nothing but the cache)."""
    facts = HostFacts(host=host.name, python=host_config.python)
    try:
        if inline:
            script = ["-c", workload_path("cli_help.py").read_text()]
        else:
            facts.workloads_dir = upload_workloads(host, host_config.workdir)
            script = [f"{facts.workloads_dir}/cli_help.py"]
        cache = f"{host_config.workdir.rstrip('/')}/cache/cli-help"
        argv = [host_config.python, *script, "--cache-dir", cache, "--module", VLLM_SERVER_HELP]
        argv += [arg for dist in dists for arg in ("--dist", dist)]
        result = host.run(wrap_timeout(shlex.join(argv), HELP_TIMEOUT_S), timeout=HELP_TIMEOUT_S + 15)
    except EyasError as exc:
        facts.problems.append(f"reading the --help of {' and '.join(('vllm', *dists))} failed: {exc}")
        return facts
    answer = last_json(result.stdout)
    if not result.ok or not isinstance(answer, dict):
        detail = (result.stderr or result.stdout).strip()[-300:]
        facts.problems.append(f"cli_help.py failed on {host.name} (exit {result.rc}): {detail}")
        return facts
    facts.help = answer.get("commands", {})
    facts.problems += answer.get("problems", [])
    return facts


def found_in(item: str, helps: dict[str, str]) -> list[str]:
    """The commands whose help mentions `item` (a --flag, or a bare word such as a speculative method) as a whole
    word, so that --seed is not found inside --seed-offset."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(item)}(?![\w-])")
    return [command for command, text in helps.items() if pattern.search(text)]


def search_docs(
    host: Host,
    python: str,
    query: str,
    *,
    script: str,
    max_results: int = 5,
    paths: list[str] | None = None,
    packages: bool = True,
    origin: Origin = "host",
) -> list[SearchHit]:
    """Passages of the installed packages' READMEs (and `paths`) that match `query`, via package_docs.py."""
    argv = [python, script, "--query", query, "--max", str(max_results)]
    argv += [arg for path in paths or [] for arg in ("--path", path)]
    if not packages:
        argv.append("--no-packages")
    result = host.run(wrap_timeout(shlex.join(argv), DOCS_TIMEOUT_S), timeout=DOCS_TIMEOUT_S + 15)
    hits = last_json(result.stdout)
    if not result.ok or not isinstance(hits, list):
        detail = (result.stderr or result.stdout).strip()[-300:]
        raise EyasError(f"Searching the documents on {host.name} failed (exit {result.rc}): {detail}")
    return [
        SearchHit(title=hit["title"], url=_located(hit["url"], host, origin), snippet=hit["snippet"], origin=origin)
        for hit in hits
    ]


def _located(url: str, host: Host, origin: Origin) -> str:
    """A file on a host as host://<name>/<path>, so no reader mistakes it for a file of their own machine."""
    return f"host://{host.name}{url.removeprefix('file://')}" if origin == "host" else url


def local_docs_script() -> tuple[str, str]:
    """(python, script) to search documents on the control machine itself."""
    return sys.executable, str(workload_path("package_docs.py"))
