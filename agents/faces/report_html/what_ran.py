"""The report's "What ran" section: every size with its meaning, the prompts and their split, how training was set
up and how fast it went, the drafter's folder and files, and the versions of eyas and the host's packages."""

from __future__ import annotations

from eyas.agents.faces.report_html.record import RunRecord
from eyas.agents.faces.report_html.sections import h, missing, section, table
from eyas.graph.phases.report.what_ran import size_rows, what_ran_rows


def what_ran(record: RunRecord) -> str:
    staged = next((row for row in record.job_progress("train") if row.get("phase") == "staged"), None)
    # A run started before its input carried eyas's build has it in run.json only.
    state = {**record.state, "eyas": record.state.get("eyas") or record.meta.get("eyas")}
    rows = [(f"<b>{h(label)}</b>", f'<span data-key="{h(label)}">{h(text)}</span>')
            for label, text in what_ran_rows(state, staged)]  # fmt: skip
    body = table((), rows)
    sizes = size_rows(record.state)
    if sizes:
        body += "<h3>Sizes</h3>" + table(
            ("size", "value", "meaning"), [(h(name), h(value), h(meaning)) for name, value, meaning in sizes]
        )
    else:
        body += missing("the run's sizes")
    return section("what-ran", "What ran", body)
