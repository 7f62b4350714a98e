"""Can the configured drafter_base be used for this target? Answered from the two config.json files, at verify.

A drafter that cannot be used (another hidden size or vocabulary, aux layers the target does not have, a layout
eyas cannot convert) would otherwise be found by train.py, after generation and extraction: a day later on a
large target. A SpecForge drafter passes here and is converted to speculators' format before the data gate
(graph/phases/data/drafter.py). A hub id is not fetched here: download.py checks it the same way there, once
downloaded.
"""

from __future__ import annotations

import json
from typing import Any

from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.errors import RemoteFileNotFound
from eyas.tools.workloads.drafter_format import mismatches, shape
from eyas.tools.workloads.target_model import text_fields


def _config(ctx: CheckContext, directory: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(ctx.host.read_text(f"{directory.rstrip('/')}/config.json"))
    return loaded


def check_drafter(ctx: CheckContext) -> CheckResult:
    base = ctx.drafter_base
    if not base:
        return CheckResult(name="drafter", status=Status.OK, message="no drafter_base: the drafter is trained anew")
    if ctx.hub_drafter:
        message = f"{base} is checked against the target once downloaded, before the data gate"
        return CheckResult(name="drafter", status=Status.OK, message=message)
    model_dir = ctx.target.model_dir
    if model_dir is None:
        return CheckResult(
            name="drafter", status=Status.WARN,
            message=f"target.model_dir is not set, so {base} cannot be checked against the target; set it.",
        )  # fmt: skip
    try:
        drafter, target = _config(ctx, base), text_fields(_config(ctx, model_dir))
    except RemoteFileNotFound as missing:
        return CheckResult(
            name="drafter", status=Status.FAIL,
            message=f"{missing}; pipeline.drafter_base and target.model_dir must be model directories on the host.",
        )  # fmt: skip
    except ValueError as error:
        return CheckResult(name="drafter", status=Status.FAIL, message=f"a config.json does not parse: {error}")
    found = shape(drafter)
    facts = {"path": base, **found.__dict__}
    problems = mismatches(drafter, target)
    if problems:
        return CheckResult(
            name="drafter", status=Status.FAIL, facts=facts,
            message=f"drafter_base {base} cannot be used for {model_dir}: " + "; ".join(problems) + ". Point "
            "pipeline.drafter_base at a drafter trained for this target, or unset it to train one from scratch.",
        )  # fmt: skip
    converted = " (converted to speculators' format before the data gate)" if found.format == "specforge" else ""
    return CheckResult(
        name="drafter", status=Status.OK, facts=facts,
        message=f"{found.format} drafter{converted}: reads width {found.target_hidden_size}, vocab "
        f"{found.target_vocab_size}, draft vocab {found.draft_vocab_size}, layers {found.aux_layer_ids or 'default'}",
    )  # fmt: skip
