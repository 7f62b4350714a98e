"""The report's sections for the phases that leave progress over time: generation, extraction and training, each
drawn from its job's progress lines or the drafter's own metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eyas.agents.faces.report_html.charts import Chart, Series, line_chart
from eyas.agents.faces.report_html.record import RunRecord
from eyas.agents.faces.report_html.sections import figure, fmt, h, last_value, megabytes, missing, section, table
from eyas.graph.phases.report.node import online_caption, online_rows
from eyas.graph.state import run_plan


def minutes(rows: list[dict[str, Any]], origin: float) -> list[float]:
    return [(float(row["time"]) - origin) / 60 for row in rows]


def progress_figure(name: str, title: str, rows: list[dict[str, Any]], keys: Sequence[tuple[str, str]],
                    origin: float, ylabel: str, caption: str) -> str:  # fmt: skip
    """A job's progress over time; a job that printed one progress line is one point, said in words instead."""
    if len(rows) < 2:
        values = ", ".join(f"{label} {fmt(rows[0].get(key))}" for key, label in keys) if rows else "none"
        when = f" at {minutes(rows, origin)[0]:.1f} min" if rows else ""
        return f'<p class="reading" data-name="{h(name)}">{h(title)}: {h(values)}{h(when)} (one progress line).</p>'
    series = [Series(label, minutes(rows, origin), [row.get(key) for row in rows]) for key, label in keys]
    return figure(line_chart(name, title, "minutes since the run started", ylabel, series), caption)


def generation(record: RunRecord) -> str:
    rows = [row for row in record.job_progress("data") if "done" in row and "time" in row]
    if not rows or record.started is None:
        return section("generation", "Generation", missing("generation progress (no job log was read)"))
    origin = record.started
    body = progress_figure("gen-done", "Requests done", rows, (("done", "done"), ("failed", "failed")), origin,
                           "requests", "Requests done and failed over time")  # fmt: skip
    body += progress_figure("gen-tps", "Generation throughput", rows, (("tokens_per_s", "tokens/s"),), origin,
                            "tokens/s", "Tokens per second over time")  # fmt: skip
    body += f"<p>{h(rows[-1].get('done'))} of {h(rows[-1].get('total'))} requests done, "
    body += f"{h(last_value(rows, 'failed') or 0)} failed.</p>"
    return section("generation", "Generation", body)


def extraction(record: RunRecord) -> str:
    rows = [row for row in record.job_progress("extract") if "done" in row and "time" in row]
    if not rows or record.started is None:
        return section("extraction", "Extraction", missing("extraction progress (no job log was read)"))
    body = progress_figure("ext-done", "Samples extracted", rows, (("done", "samples"),), record.started,
                           "samples", "Samples over time")  # fmt: skip
    planned = run_plan(record.state).phase("extract").disk_bytes
    written = last_value(rows, "bytes")
    if written is not None and planned:
        body += f"<p>Hidden states: {h(megabytes(written))} written against {h(megabytes(planned))} planned.</p>"
    else:
        body += missing("the bytes written or the planner's prediction")
    return section("extraction", "Extraction", body)


def training(record: RunRecord) -> str:
    online = online_table(record.state.get("online"))
    curves = record.state.get("training")
    if curves and curves.get("train"):
        return section("training", "Training", training_curves(curves) + online)
    rows = [row for row in record.job_progress("train") if row.get("phase") == "train" and "loss" in row]
    if not rows:
        return section(
            "training", "Training", missing("training curves (no metrics.jsonl, no progress lines)") + online
        )
    body = missing("the drafter's metrics.jsonl curves (learning rate, validation): shown from the job log instead")
    steps = [float(row["done"]) for row in rows]
    body += figure(
        line_chart(
            "train-loss",
            "Training loss",
            "step",
            "loss",
            [Series("loss", steps, [row["loss"] for row in rows], smoothed=True)],
            log_when_wide=True,
        ),
        "Loss per step (job log; faint: as measured; solid: its moving average)",
    )
    body += figure(accuracy_chart("train-acc", steps, [row.get("acc") or [] for row in rows]),
                   "Accuracy per step and TTT position (job log)")  # fmt: skip
    return section("training", "Training", body + online)


def online_table(summary: dict[str, Any] | None) -> str:
    """The hidden states fetched online per epoch (train.py's online_summary.json): samples, bytes written and
    deleted, and the disk's high-water mark against the bound; nothing for a run that fetched none."""
    if not summary:
        return ""
    bound = summary.get("bound_bytes")
    bounded = isinstance(bound, int) and bound > 0
    rows = [
        (h(row["epoch"]), h(f"{row['fetched']:,}"), h(megabytes(row["bytes_written"])),
         h(megabytes(row["bytes_deleted"])),
         f'<span data-key="high_water_bytes" data-value="{h(row["high_water_bytes"])}">'
         f"{h(megabytes(row['high_water_bytes']))}</span>",
         h(f"{row['high_water_bytes'] / bound:.0%}" if bounded else "—"))
        for row in online_rows(summary)
    ]  # fmt: skip
    caption = f"<h3>Online hidden states</h3><p>{h(online_caption(summary))}</p>"
    headers = ("epoch", "samples fetched", "bytes written", "bytes deleted", "high-water mark", "of the bound")
    return '<div id="online">' + caption + (table(headers, rows) if rows else "") + "</div>"


def training_curves(curves: dict[str, list[dict[str, Any]]]) -> str:
    train, val = curves["train"], curves.get("val", [])
    steps = [float(row["step"]) for row in train]
    loss = [Series("training", steps, [row.get("loss") for row in train], smoothed=True)]
    if val:
        loss.append(Series("validation", [float(row["step"]) for row in val], [row.get("loss") for row in val],
                           dashed=True))  # fmt: skip
    body = figure(line_chart("train-loss", "Loss", "step", "loss", loss, log_when_wide=True),
                  "Loss per step (faint: as measured; solid: its moving average), validation per epoch")  # fmt: skip
    if any(row.get("tokens_per_s") for row in train):
        speed = [Series("tokens/s", steps, [row.get("tokens_per_s") for row in train], smoothed=True)]
        body += figure(line_chart("train-tps", "Training throughput", "step", "tokens/s", speed),
                       "Tokens per second per step (faint: as measured; solid: its moving average)")  # fmt: skip
    else:
        body += missing("training throughput per step")
    body += figure(accuracy_chart("train-acc", steps, [row.get("acc") or [] for row in train]),
                   "Training accuracy per TTT position")  # fmt: skip
    if any(row.get("lr") is not None for row in train):
        lr = line_chart(
            "train-lr", "Learning rate", "step", "lr", [Series("lr", steps, [row.get("lr") for row in train])]
        )
        body += figure(lr, "Learning rate per step")
    else:
        body += missing("the learning rate")
    if val:
        rows = [(h(row.get("epoch")), h(row["step"]), h(fmt(row.get("loss"))),
                 h(", ".join(fmt(value) for value in row.get("acc") or []))) for row in val]  # fmt: skip
        body += table(("epoch", "step", "validation loss", "accuracy by position"), rows)
    else:
        body += missing("validation rows")
    return body


def accuracy_chart(name: str, steps: list[float], accuracies: list[list[float]]) -> Chart:
    positions = max((len(acc) for acc in accuracies), default=0)
    series = [
        Series(
            f"position {position + 1}", steps, [acc[position] if position < len(acc) else None for acc in accuracies]
        )
        for position in range(positions)
    ]
    return line_chart(name, "Accuracy", "step", "accuracy", series)
