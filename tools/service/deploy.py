"""Put speculative decoding into production (the evaluation's winner: a trained drafter, or vLLM's n-gram
speculation), and take it out again.

Deploy adds one drop-in to the production unit that replaces its ExecStart with the same command plus
`--speculative-config` (tools/workloads/speculative.py: the config the evaluation measured), restarts the service,
waits for the deep health check, then sends probe requests and reads tokens/s and acceptance from production's own
/metrics counters. A drafter stays when acceptance and tokens/s pass the thresholds (by default production must not
serve fewer tokens/s with it than without it) and its speedup beats, by a margin, the one vLLM's n-gram speculation
reached in the evaluation (the free alternative); n-gram stays when its tokens/s pass (its acceptance, counted only
where the context repeats, is no measure of it): that rule, and its words, are keep_rule.py's. Otherwise, and
whenever the new service fails to come up, rollback removes exactly that drop-in, restarts, and checks that
production is healthy with its old command line.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from eyas.tools.checks.vllm_metrics import SpecDecodeCounters, summarize_vllm_metrics
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.launch.api_key import production_key
from eyas.tools.launch.unit_file import UnitFile
from eyas.tools.service.base import Service, ServiceError
from eyas.tools.service.deploy_result import DeployResult, Probe
from eyas.tools.service.keep_rule import method_words
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.config import TargetConfig
from eyas.tools.workloads.speculative import DRAFTER_METHOD

Progress = Callable[[str], None]
PROBE_PROMPTS = (
    "Explain how a lighthouse works in three sentences.",
    "Write a short list of tips for keeping houseplants alive.",
    "What is the difference between weather and climate?",
    "Describe how bread rises.",
    "Give three reasons to learn a second language.",
    "Summarize how vaccines train the immune system.",
    "Write two sentences about the history of maps.",
    "Why do leaves change colour in autumn?",
)


def _restart(service: Service, thresholds: Thresholds, progress: Progress) -> float:
    """Restart and wait for the deep health check: the seconds production did not serve."""
    started = service.clock.monotonic()
    service.restart()
    service.wait_healthy(thresholds.ready_timeout_s, progress)
    return _since(service, started)


def _since(service: Service, started: float) -> float:
    return round(service.clock.monotonic() - started, 1)


def drop_in_text(unit: UnitFile, speculative: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The drop-in (an empty ExecStart= clears the old one, systemd.service(5)) and the argv it makes: production's
    command with its --speculative-config set to `speculative` (one production serves already is replaced; removing
    the drop-in brings it back)."""
    config = json.dumps(dict(speculative), separators=(",", ":"))
    argv = [*without_speculative_config(unit.exec_start), "--speculative-config", config]
    drafter_dir = str(speculative.get("model", ""))
    if any(ch in drafter_dir for ch in "%$\n"):
        raise ServiceError(f"The drafter path {drafter_dir!r} has a character systemd expands (%, $) or a newline.")
    text = (
        f"# Written by eyas deploy: the production command plus speculative decoding ({speculative['method']}). "
        "`eyas rollback RUN` removes it.\n"
        "[Service]\nExecStart=\n"
        f"ExecStart={shlex.join(argv)}\n"
    )
    return text, argv


def share_drafter_command(unit: UnitFile, drafter_dir: str) -> str | None:
    """The command that lets production's own user (the unit's User=) read the drafter, None when the unit names
    none (it runs as eyas's user, or as root). A job's files are owner-only (umask 077), so a production that runs
    as `vllm` could not load a drafter eyas trained as another user: the drafter becomes readable (go+rX), and the
    folders above it that the umask closed passable (go+x lists nothing: the run's data stays closed), up to the
    first that others may pass already."""
    if unit.user is None:
        return None
    q = shlex.quote
    return (
        f'[ "$(id -un)" = {q(unit.user)} ] || {{ chmod -R go+rX {q(drafter_dir)} && d={q(drafter_dir)} && '
        'while d=$(dirname "$d") && [ "$d" != / ] && [ "$d" != . ]; do '
        'case $(stat -c %A "$d") in *[xt]) break ;; esac; chmod go+x "$d" || exit 1; done; }'
    )


def write_drop_in(service: Service, path: str, text: str) -> None:
    """Write the drop-in owner-only (it holds production's whole command line, an --api-key with it; systemd
    reads it as root, the stand-in as its owner) and have the service manager read it."""
    service.host.write_text(path, text, mode=0o600)
    service.reload()


def without_speculative_config(argv: list[str]) -> list[str]:
    """The argv without its --speculative-config (either spelling) and that flag's value."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--speculative-config":
            skip = True
        elif not arg.startswith("--speculative-config="):
            kept.append(arg)
    return kept


def probe(
    http: HttpClient, target: TargetConfig, clock: Clock, thresholds: Thresholds, headers: dict[str, str] | None
) -> Probe:
    """Send the probe requests one by one (with production's key, `headers`) and read the spec-decode counters
    before and after them (vLLM leaves /metrics open). One request goes first, outside the window: the first after a
    start pays for warm-up (as every benchmark's first does), which would count against whichever side was measured
    just after a restart (the side with speculation, in a deploy)."""
    base = str(target.base_url).rstrip("/")
    _ask(http, target, thresholds, headers, PROBE_PROMPTS[-1])
    before = _counters(http, base)
    tokens, started = 0, clock.monotonic()
    for index in range(thresholds.probe_requests):
        tokens += _ask(http, target, thresholds, headers, PROBE_PROMPTS[index % len(PROBE_PROMPTS)])
    seconds = max(clock.monotonic() - started, 1e-6)
    after = _counters(http, base)
    measured = after.minus(before) if after is not None and before is not None else None
    return Probe(
        requests=thresholds.probe_requests, completion_tokens=tokens, seconds=round(seconds, 3),
        tokens_per_s=round(tokens / seconds, 3),
        mean_acceptance_length=measured.mean_acceptance_length if measured else None,
        acceptance_rate=measured.acceptance_rate if measured else None,
        drafts=measured.num_drafts if measured else None,
    )  # fmt: skip


def _ask(
    http: HttpClient, target: TargetConfig, thresholds: Thresholds, headers: dict[str, str] | None, prompt: str
) -> int:
    """One probe request at temperature 0: the completion tokens production answered with."""
    body = {"model": target.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": thresholds.probe_max_tokens, "temperature": 0}  # fmt: skip
    url = f"{str(target.base_url).rstrip('/')}/v1/chat/completions"
    try:
        answer = http.post_json(url, body, headers=headers, timeout=thresholds.probe_timeout_s)
    except HttpError as exc:
        raise ServiceError(f"A probe request to production got no answer ({exc}).") from None
    if answer.status != 200:
        raise ServiceError(f"A probe request to production answered HTTP {answer.status}: {answer.body[:300]!r}")
    return int(answer.json().get("usage", {}).get("completion_tokens", 0))


def _counters(http: HttpClient, base: str) -> SpecDecodeCounters | None:
    try:
        scraped = http.get(f"{base}/metrics")
    except HttpError as exc:
        raise ServiceError(f"Production's /metrics did not answer ({exc}).") from None
    return summarize_vllm_metrics(scraped.body).spec_decode if scraped.status == 200 else None


def judge(
    before: Probe | None, after: Probe, thresholds: Thresholds, ngram_speedup: float | None = None,
    method: str = DRAFTER_METHOD,
) -> tuple[bool, str, float | None]:  # fmt: skip
    """Keep `method` or roll it back, by the rule the thresholds set (keep_rule.py) on the two probes."""
    rule = thresholds.keep_rule(ngram_speedup, method)
    return rule.judge(before.tokens_per_s if before else None, after.tokens_per_s, after.mean_acceptance_length)


def deploy(
    service: Service, target: TargetConfig, http: HttpClient, clock: Clock, speculative: Mapping[str, Any],
    thresholds: Thresholds, progress: Progress = print, ngram_speedup: float | None = None,
) -> DeployResult:  # fmt: skip
    """Measure production, add `speculative` (a drafter's or n-gram's config), restart, measure again; roll back
    unless it passes (against the target alone, and a drafter against `ngram_speedup`, n-gram speculation's in the
    evaluation, when it was measured)."""
    unit = service.effective_unit()
    path = service.drop_in_path()
    if service.host.exists(path):
        raise ServiceError(f"{path} exists: a drafter is deployed already. Run `eyas rollback RUN` first.")
    text, argv = drop_in_text(unit, speculative)
    drafter_dir = speculative.get("model")
    share = share_drafter_command(unit, str(drafter_dir)) if drafter_dir else None
    headers = production_key(target, unit).headers  # the drop-in changes no key: one for both measurements
    progress(f"deploy: measuring production before ({thresholds.probe_requests} probe requests)")
    before = probe(http, target, clock, thresholds, headers)
    result = DeployResult(kept=False, reason="", drop_in=path, drop_in_text=text, share_drafter=share,
                          argv_before=unit.exec_start, argv_deployed=argv, before=before)  # fmt: skip
    if share is not None:
        progress(f"deploy: letting {unit.user}, who runs {service.name}, read {drafter_dir}")
        service.host.run(share, timeout=120).check(f"opening {drafter_dir} to {unit.user}")
    method = method_words(speculative["method"])
    progress(f"deploy: writing {path} and restarting {service.name}")
    write_drop_in(service, path, text)
    started = service.clock.monotonic()
    try:
        result.downtime_s = _restart(service, thresholds, progress)
    except ServiceError as exc:
        result = result.model_copy(update={"reason": f"production did not come up with {method}: {exc}",
                                           "downtime_s": _since(service, started)})  # fmt: skip
        return rollback(service, thresholds, progress, result)
    result.restart_s = service.last_start_s
    progress(f"deploy: {service.name} is healthy with {method}; measuring ({thresholds.probe_requests} requests)")
    try:
        after = probe(http, target, clock, thresholds, headers)
    except ServiceError as exc:
        result = result.model_copy(update={"reason": f"production with {method} failed the probe: {exc}"})
        return rollback(service, thresholds, progress, result)
    kept, reason, speedup = judge(before, after, thresholds, ngram_speedup, speculative["method"])
    result = result.model_copy(update={"after": after, "speedup": speedup, "reason": reason, "kept": kept})
    return result if kept else rollback(service, thresholds, progress, result)


def rollback(
    service: Service, thresholds: Thresholds, progress: Progress = print, result: DeployResult | None = None
) -> DeployResult:
    """Remove exactly the drop-in deploy added, restart, and wait for health with the old command line."""
    path = service.drop_in_path()
    progress(f"rollback: removing {path} and restarting {service.name}")
    service.host.run(f"rm -f -- {shlex.quote(path)}", timeout=30).check(f"removing {path}")
    service.reload()
    down = _restart(service, thresholds, progress)
    argv = service.effective_unit().exec_start
    if result is None:
        result = DeployResult(kept=False, reason="rolled back by hand", drop_in=path, drop_in_text="",
                              argv_before=argv, argv_deployed=[])  # fmt: skip
    if argv != result.argv_before:
        raise ServiceError(f"After the rollback {service.name} runs {shlex.join(argv)}, not its old command line.")
    progress(f"rollback: {service.name} healthy again with its old command line")
    downtime = round((result.downtime_s or 0.0) + down, 1)
    return result.model_copy(update={"kept": False, "rollback_restart_s": service.last_start_s, "downtime_s": downtime})
