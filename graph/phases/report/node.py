"""The morning report: what ran, what each gate decided and why, and what the drafter measured."""

from __future__ import annotations

import json
import shlex
from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.downtime import LOG, restore, summary
from eyas.graph.phases.deploy.node import run_policy, varies_k
from eyas.graph.phases.deploy.record import deploy_record
from eyas.graph.phases.evaluate.bench_record import LATENCY_HEADERS, Bench
from eyas.graph.phases.evaluate.record import MEASURE_LABELS, TARGET_ALONE, Evaluation, run_evaluation
from eyas.graph.phases.report.drafter_card import make_ready_to_publish
from eyas.graph.phases.report.headline import headline
from eyas.graph.phases.report.markdown import fence, md_code, md_text
from eyas.graph.phases.report.next_step import run_next_steps
from eyas.graph.phases.report.what_ran import list_files, size_rows, what_ran_rows
from eyas.graph.phases.servers import online_training
from eyas.graph.policy import policy_tournament
from eyas.graph.run_facts import ProductionLog, run_facts
from eyas.graph.state import DeployOutcome, RunState
from eyas.tools.recording.redact import Redactor
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.settings.units import format_size
from eyas.tools.workloads.speculative import NGRAM_METHOD

ONLINE_SUMMARY = "online_summary.json"  # train.py --online writes it beside the drafter

EVALUATION_KEYS = tuple(
    (key, MEASURE_LABELS[key])
    for key in ("mean_acceptance_length", "acceptance_rate", "tokens_per_s_baseline", "tokens_per_s_speculative",
                "speedup", "k", "outputs_identical")
)  # fmt: skip


def render_report(state: RunState, ctx: RunContext) -> str:
    run = run_facts(state)
    lines = [f"# eyas run {run.run_id or ctx.run.run_id}", ""]
    deployed = deploy_record(ctx.run)
    steps = run_next_steps(state, deployed, run_policy(ctx).deploy_min_speedup)
    lines += [outcome_line(headline(state, deployed)), *next_step_lines(steps), ""]
    lines += [f"**Host:** {md_text(ctx.host.name)}; target {md_text(ctx.config.target.base_url)}", ""]
    lines += what_ran_lines(state)
    lines += ["", "## Verification", "", "| check | status | finding |", "|---|---|---|"]
    lines += [f"| {md_text(name)} | {md_text(c.status)} | {md_text(c.message)} |"
              for name, c in run.verification.items()]  # fmt: skip
    if run.plan.model_fields_set:  # the plan node ran
        lines += ["", "## Plan", "", md_text(run.plan.verdict or ""), ""]
    lines += gate_lines(run.decisions)
    lines += ["", "## Jobs", ""]
    lines += [f"- {phase}: {', '.join(ids)}" for phase, ids in run.jobs.items()]
    evaluation = run_evaluation(state)
    if evaluation:
        lines += ["", "## Evaluation", "", "| measure | value |", "|---|---|"]
        lines += [
            f"| {label} | {_fmt(evaluation.figure(key))} |"
            for key, label in EVALUATION_KEYS
            if key in evaluation.model_fields_set
        ]
        per_position = evaluation.per_position
        if per_position:
            rates = ", ".join(f"{position + 1}: {_fmt(rate)}" for position, rate in enumerate(per_position))
            lines += ["", f"Acceptance by draft position: {rates}"]
        lines += ["", f"Side by side at k={evaluation.k}, on the same prompts and server flags:", ""]
        lines += [f"| {' | '.join(SIDE_BY_SIDE)} |", "|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in side_by_side_rows(evaluation)]
        lines += [line for note in evaluation.disagreement_notes() for line in ("", md_text(note))]
        if evaluation.bench is not None:
            lines += latency_lines(evaluation.bench)
        found = policy_tournament(run_policy(ctx), evaluation, run.sizes.concurrency)
        k_text = found.k_per_batch_size(varies_k(state))
        if k_text is not None:
            lines += ["", f"**k per batch size:** {md_text(k_text)}"]
    if run.training:
        lines += training_lines(run.training)
    if run.online:
        lines += online_lines(run.online)
    if run.production is not None:
        lines += production_lines(run.production)
    failure = run.failure
    if failure:
        lines += ["", "## Failure", "", md_text(f"{failure['job_id']} {failure['status']}: {failure['diagnosis']}")]
    lines += ["", "## Files on the host", ""]
    lines += [f"- {name}: {md_text(path)}" for name, path in run.artifacts.items()]
    if run.deploy is not None:
        # Last, as `eyas deploy` and `eyas rollback` replace it (with_deploy).
        lines += ["", *deploy_section(run.deploy, deployed)]
    return "\n".join(lines) + "\n"


def latency_lines(bench: Bench) -> list[str]:
    """What `vllm bench serve` measured: a caption, then per server and concurrency TTFT, TPOT and tokens/s."""
    lines = ["", "### Latency under load", "", md_text(bench.caption())]
    rows = bench.rows()
    if rows:
        lines += ["", "| " + " | ".join(LATENCY_HEADERS) + " |", "|" + "---|" * len(LATENCY_HEADERS)]
        lines += ["| " + " | ".join(md_text(cell) for cell in row) + " |" for row in rows]
    return lines


def gate_lines(decisions: list[Any]) -> list[str]:
    """The gates table: who decided and why, as they typed it (escaped: a reason is a person's text)."""
    lines = ["", "## Gates", "", "| gate | decision | by | reason |", "|---|---|---|---|"]
    return lines + [
        f"| {md_text(d['gate'])} | {md_text(d['action'])} | {md_text(d['who'])} | {md_text(d['reason'])} |"
        for d in decisions
    ]


OUTCOME = "**Outcome:** "
NEXT_STEP, ALSO = "**Next step:** ", "**Also:** "


def outcome_line(text: str) -> str:
    return OUTCOME + md_text(text)


def next_step_lines(steps: list[str]) -> list[str]:
    """What to do next (graph/phases/report/next_step.py), each step a paragraph below the outcome."""
    return [line for index, step in enumerate(steps) for line in ("", (ALSO if index else NEXT_STEP) + md_text(step))]


def what_ran_lines(state: RunState) -> list[str]:
    """Every size with its meaning, then the prompts, training, drafter and versions (graph/phases/report/what_ran)."""
    lines = ["## What ran", "", "| size | value | meaning |", "|---|---|---|"]
    lines += [f"| {name} | {md_text(value)} | {md_text(meaning)} |" for name, value, meaning in size_rows(state)]
    lines += [""]
    lines += [f"- **{label}:** {md_text(text)}" for label, text in what_ran_rows(state)]
    return lines


SIDE_BY_SIDE = ("measured", "tokens/s", "mean acceptance length", "speedup")


def side_by_side_rows(evaluation: Evaluation) -> list[tuple[str, str, str, str]]:
    """The target alone, n-gram speculation and the drafter as table cells (SIDE_BY_SIDE), for the Markdown and
    the HTML report alike; a baseline the evaluation did not measure says so."""
    rows = []
    for row in evaluation.side_by_side():
        if not row.measured:
            rows.append((row.name, row.summary(), "n/a", "n/a"))
        elif row.name == TARGET_ALONE:
            rows.append((row.name, _fmt(row.tokens_per_s), "n/a (no drafts)", "1 (the reference)"))
        else:
            rows.append((row.name, _fmt(row.tokens_per_s), _fmt(row.mean_acceptance_length), _fmt(row.speedup)))
    return rows


def _fmt(value: Any) -> str:
    """A figure for a table cell; one that was not measured (no drafter yet, no counters) reads n/a."""
    if value is None:
        return "n/a"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


CURVE_POINTS = 200  # training rows kept in the state and the report: enough to plot, small in the checkpoint


def training_curves(metrics_jsonl: str) -> dict[str, list[dict[str, Any]]]:
    """The drafter's metrics.jsonl as curves: every validation row, and at most CURVE_POINTS training rows, evenly
    spaced (the last kept); a step written twice by a resumed run counts once, its last row."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for line in metrics_jsonl.splitlines():
        try:
            row = json.loads(line)
            rows[(str(row["split"]), int(row["step"]))] = row
        except (ValueError, KeyError, TypeError):
            continue  # a torn line
    by_step = [rows[key] for key in sorted(rows, key=lambda key: key[1])]
    train = [row for row in by_step if row["split"] == "train"]
    stride = max(1, -(-len(train) // CURVE_POINTS))
    return {"train": train[::-1][::stride][::-1], "val": [row for row in by_step if row["split"] == "val"]}


def training_lines(curves: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [
        "",
        "## Training",
        "",
        "| epoch | step | validation loss | accuracy by draft position |",
        "|---|---|---|---|",
    ]
    for row in curves["val"]:
        accuracy = ", ".join(_fmt(value) for value in row.get("acc", []))
        lines.append(f"| {_fmt(row.get('epoch'))} | {row['step']} | {_fmt(row.get('loss'))} | {accuracy} |")
    if curves["train"]:
        last = curves["train"][-1]
        lines += [
            "",
            f"Last step {last['step']}: training loss {_fmt(last.get('loss'))} (curves: `training` in the state).",
        ]
    return lines


def online_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Each epoch of an online_summary.json as the report shows it; an epoch of the wrong shape is left out."""
    rows = []
    for epoch in summary.get("epochs") or []:
        try:
            rows.append({key: int(epoch[key]) for key in
                         ("epoch", "fetched", "bytes_written", "bytes_deleted", "high_water_bytes")})  # fmt: skip
        except (KeyError, TypeError, ValueError):
            continue
    return rows


def online_caption(summary: dict[str, Any]) -> str:
    """Who fetched the hidden states online, how many at most at once and the bound, as both reports say it; for
    speculators' dataset (CUDA), also what eyas cannot tell of it."""
    bound = summary.get("bound_bytes")
    bound_text = format_size(bound) if isinstance(bound, int) else "?"
    window = summary.get("window", "?")
    if summary.get("trainer") != "speculators":
        return (
            f"Fetched from the extraction server beside the trainer, at most {window} samples at once"
            f" (bound {bound_text})."
        )
    workers = summary.get("workers")
    each = "its own process" if workers == 0 else f"{workers if workers is not None else '?'} dataloader worker(s)"
    return (
        f"Fetched by speculators' own dataset on CUDA from the extraction server beside the trainer: each of "
        f"{summary.get('gpus', '?')} GPU(s) with {each}, one sample at a time each, at most {window} at once (bound "
        f"{bound_text}), each deleted once loaded. eyas does not count them on CUDA: no samples, bytes or high-water "
        "mark per epoch. A sample whose hidden states are for other tokens is skipped there with a warning in the "
        "trainer's log (never trained on), not refused."
    )


def online_lines(summary: dict[str, Any]) -> list[str]:
    """The hidden states fetched online, per epoch: samples, bytes written and deleted, and the disk's high-water
    mark against the bound the plan stated (no table where speculators' dataset fetched them: nothing counted)."""
    bound = summary.get("bound_bytes")
    lines = ["", "## Online hidden states", "", online_caption(summary)]
    rows = online_rows(summary)
    if not rows:
        return lines
    lines += [
        "",
        "| epoch | samples fetched | bytes written | bytes deleted | high-water mark | of the bound |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        share = f"{row['high_water_bytes'] / bound:.0%}" if isinstance(bound, int) and bound > 0 else "?"
        lines.append(
            f"| {row['epoch']} | {row['fetched']:,} | {format_size(row['bytes_written'])} | "
            f"{format_size(row['bytes_deleted'])} | {format_size(row['high_water_bytes'])} | {share} |"
        )
    return lines


def read_online_summary(ctx: RunContext, state: RunState) -> dict[str, Any] | None:
    """train.py's online_summary.json in the drafter's directory, when the train phase ran online or hybrid and
    wrote one (None otherwise, and for a file that is not a JSON object)."""
    path = f"{ctx.artifact('drafter')}/{ONLINE_SUMMARY}"
    if not run_facts(state).ran("train") or not online_training(state) or not ctx.host.exists(path):
        return None
    try:
        summary = json.loads(ctx.host.read_text(path))
    except ValueError:
        return None
    return summary if isinstance(summary, dict) else None


def production_lines(production: ProductionLog) -> list[str]:
    lines = ["", "## Production downtime", ""]
    if production.stopped_now:
        lines += ["**Production is stopped now**: `eyas resume` starts it again first.", ""]
    lines += ["| phase | service | downtime | load | restarted because |", "|---|---|---|---|---|"]
    for stop in production.stops:
        load = f"{stop.load_s:.0f} s" if stop.load_s is not None else "?"
        lines.append(
            f"| {stop.phase} | {md_text(stop.service)} ({stop.backend}) | {stop.downtime_s:.0f} s | "
            f"{load} | {md_text(stop.restarted_because)} |"
        )
    return lines


DEPLOY_HEADING = "## Deploy"


def deploy_lines(deploy: DeployResult) -> list[str]:
    """Production before and after the deployed method (the drafter, or n-gram speculation), as its own /metrics
    and probe requests measured it."""
    verdict = "kept" if deploy.kept else "rolled back"
    ngram = deploy.method == NGRAM_METHOD
    name, after = ("N-gram speculation", "with n-gram speculation") if ngram else ("Drafter", "with the drafter")
    lines = [DEPLOY_HEADING, "", f"**{name} {verdict}:** {md_text(deploy.reason)}", ""]
    lines += [
        "| production | tokens/s | mean acceptance length | acceptance rate | probe requests |",
        "|---|---|---|---|---|",
    ]
    for label, probe in (("before", deploy.before), (after, deploy.after)):
        if probe is not None:
            lines.append(
                f"| {label} | {_fmt(probe.tokens_per_s)} | {_fmt(probe.mean_acceptance_length)} | "
                f"{_fmt(probe.acceptance_rate)} | {probe.requests} |"
            )
    if deploy.downtime_s is not None:
        lines += ["", f"Production was down {deploy.downtime_s:.0f} s (each restart until it was healthy again)."]
    now = deploy.argv_deployed if deploy.kept else deploy.argv_before
    if now:
        lines += ["", f"Production runs: {md_code(shown_argv(now))}"]
    removed = " (removed by the rollback)" if not deploy.kept else ""
    lines += ["", f"Drop-in {md_code(deploy.drop_in)}{removed}:"]
    text = Redactor().text(deploy.drop_in_text.rstrip())
    ticks = fence(text, 3)  # production's argv is in it: no run of backticks in it closes the block
    lines += ["", ticks, text, ticks]
    return lines


def deploy_section(outcome: DeployOutcome, result: DeployResult | None) -> list[str]:
    """The deploy phase's end: production before and after when it restarted, else why production is untouched."""
    if result is not None and outcome.restarted:
        return deploy_lines(result)
    lines = [DEPLOY_HEADING, "", f"**Drafter not deployed ({outcome.status}):** {md_text(outcome.reason)}"]
    if outcome.argv_after:
        lines += ["", f"Production runs: {md_code(shown_argv(outcome.argv_after))}"]
    return lines


def shown_argv(argv: list[str]) -> str:
    """Production's command line as the report shows it: an --api-key in it hidden (the report is shared)."""
    return shlex.join(Redactor().value(argv))


def with_deploy(report: str, deploy: DeployResult, steps: list[str] | None = None) -> str:
    """The report with its deploy section replaced by this one (a later deploy or rollback supersedes it), and its
    outcome and next steps (`steps`, as they read after it) with it."""
    lines: list[str] = []
    for line in report.split(f"\n{DEPLOY_HEADING}\n", 1)[0].rstrip("\n").split("\n"):
        if line.startswith((NEXT_STEP, ALSO)):
            lines.pop()  # the blank line above it
        elif line.startswith(OUTCOME):
            lines += [outcome_line(headline({}, deploy)), *next_step_lines(steps or [])]
        else:
            lines.append(line)
    return "\n".join(lines) + "\n\n" + "\n".join(deploy_lines(deploy)) + "\n"


def report_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    update: dict[str, Any] = {"phase": "report"}
    # After a reject or an abort: production comes back before the run ends (a no-op when nothing is stopped).
    restore(ctx, "the run ended")
    if (ctx.run.root / LOG).exists():
        update["production"] = summary(ctx.run)
    run = run_facts(state)
    metrics_path = f"{ctx.artifact('drafter')}/metrics.jsonl"
    if run.ran("train") and ctx.host.exists(metrics_path):
        update["training"] = training_curves(ctx.host.read_text(metrics_path))
    online = read_online_summary(ctx, state)
    if online is not None:
        update["online"] = online
    if run.ran("evaluate") and not run.failure and not run.stopped:
        measured = json.loads(ctx.host.read_text(ctx.artifact("evaluation")))
        # What the numbers were measured on and trained with, so that a result file stands on its own.
        data = {"prompts": run.prompts, "sizes": run.recorded_sizes if "sizes" in state else None}
        update["evaluation"] = {**measured, "data": data}
    if run.ran("train"):
        make_ready_to_publish(ctx, {**state, **update})  # type: ignore[typeddict-item]
        files = list_files(ctx.host, ctx.artifact("drafter"))
        if files:
            update["drafter_files"] = files
    # The update's keys are RunState's, but mypy cannot merge a plain dict into a TypedDict.
    update["report"] = render_report({**state, **update}, ctx)  # type: ignore[typeddict-item]
    return update
