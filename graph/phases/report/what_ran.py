"""What ran, as both reports state it: every size with its meaning, how training was set up, the prompts and their
split, the drafter's folder and files, and which eyas and which host packages ran it. Plain text rows; each report
escapes them its own way (md_text, html.escape)."""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Mapping
from typing import Any

from eyas.graph.phases.train.jobs import LEARNING_RATE, VAL_RATIO
from eyas.graph.run_facts import run_facts
from eyas.tools.hosts.host import Host
from eyas.tools.settings.sizes import Sizes, shown_size
from eyas.tools.settings.units import format_size

NOT_RECORDED = "not recorded"
HOST_PACKAGES = ("vllm", "speculators", "torch", "transformers")
AUTO_OPTIMIZER = "auto: Muon on CUDA, AdamW on a CPU (train.py's log names the one that ran)"


def size_rows(state: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Each size the run recorded: its name, its value and what it means (Sizes' own description)."""
    rows = []
    for name, value in run_facts(state).recorded_sizes.items():
        field = Sizes.model_fields.get(name)
        rows.append((name, shown_size(value), (field.description or "") if field else ""))
    return rows


def what_ran_rows(state: Mapping[str, Any], staged: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """The rest of what ran, beside the sizes. `staged` is train.py's staged progress line when the caller read the
    job's log (it names the device and the optimizer that ran)."""
    run = run_facts(state)
    return [
        ("prompts", prompts_text(run.prompts)),
        ("training", training_text(state, staged)),
        ("training throughput", throughput_text(run.training)),
        ("drafter", drafter_text(state)),
        ("eyas", eyas_text(run.eyas)),
        ("host packages", packages_text(run.compat)),
    ]


def prompts_text(split: Mapping[str, Any] | None) -> str:
    if not split:
        return "no prompts were split (the run ended before its data phase)"
    text = (
        f"{split.get('source')}: {split.get('train', 0):,} trained on, {split.get('held_out', 0):,} held out "
        f"({split.get('held_out_percent', '?')}% of conversations, chosen by a hash of their id; never trained on)"
    )
    if split.get("scanned") is not None:
        text += f"; {split['scanned']:,} scanned, {split.get('skipped', 0):,} skipped as too long or empty"
    return text


def training_text(state: Mapping[str, Any], staged: Mapping[str, Any] | None) -> str:
    if not run_facts(state).ran("train"):
        return "no training ran"
    optimizer = f"{staged['optimizer']} on {staged.get('device', '?')}" if staged and "optimizer" in staged else None
    return (
        f"peak learning rate {LEARNING_RATE:g}, optimizer {optimizer or AUTO_OPTIMIZER}, "
        f"{VAL_RATIO:.0%} of the samples kept out of training for validation loss"
    )


def throughput_text(curves: Mapping[str, Any] | None) -> str:
    """The trainer's tokens per second over its steps (median, and the range), from metrics.jsonl's rows."""
    rates = [row["tokens_per_s"] for row in (curves or {}).get("train", []) if row.get("tokens_per_s")]
    if not rates:
        return NOT_RECORDED
    return (
        f"{statistics.median(rates):,.0f} tokens/s (median of {len(rates)} steps; "
        f"{min(rates):,.0f} to {max(rates):,.0f})"
    )


def drafter_text(state: Mapping[str, Any]) -> str:
    run = run_facts(state)
    path = run.artifact("drafter")
    if not path or not run.ran("train"):
        return "no drafter was trained"
    files = run.drafter_files
    if not files:
        return f"{path} (its files were not listed)"
    listed = ", ".join(f"{one['name']} ({format_size(one['bytes'])})" for one in files)
    return f"{path}: {listed}"


def eyas_text(build: Mapping[str, Any] | None) -> str:
    if not build:
        return NOT_RECORDED
    commit = build.get("commit")
    return f"{build.get('version')}, " + (
        f"commit {commit}" if commit else "installed from a package (no git checkout)"
    )


def packages_text(compat: Mapping[str, Any] | None) -> str:
    """The host interpreter's versions as the verify phase's compat check read them."""
    versions = (compat or {}).get("versions") or {}
    if not versions:
        return f"{NOT_RECORDED} (the host was not verified)"
    return ", ".join(f"{name} {versions.get(name) or 'not installed'}" for name in HOST_PACKAGES)


def list_files(host: Host, directory: str) -> list[dict[str, Any]]:
    """The plain files directly in `directory` on the host, with their sizes, by name; none when it is absent."""
    quoted = shlex.quote(directory)
    result = host.run(f"find {quoted} -maxdepth 1 -type f -printf '%f\\t%s\\n' 2>/dev/null", timeout=30)
    files = []
    for line in result.stdout.splitlines():
        name, _, size = line.rpartition("\t")
        if name and size.isdigit():
            files.append({"name": name, "bytes": int(size)})
    return sorted(files, key=lambda one: one["name"])
