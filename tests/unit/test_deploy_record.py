"""deploy.json read typed (graph/phases/deploy/record.py): every recorded one reads back and dumps to the JSON it was
written with; one from before a field existed reads with that field's default; a damaged one is refused in a
paragraph, and the HTML report lists it as missing rather than failing."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from eyas.agents.faces.report_html.record import load_record
from eyas.graph.life.watch import runs_listing
from eyas.graph.phases.deploy.record import DEPLOY_FILE, read_deploy
from eyas.graph.phases.report.headline import headline
from eyas.graph.phases.report.node import deploy_lines
from eyas.tools.errors import EyasError
from recorded_examples import EXAMPLES

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
RECORDED = sorted([*EXAMPLES.glob(f"*/{DEPLOY_FILE}"), *FIXTURES.glob("deploy_*.json")])


@pytest.mark.parametrize("path", RECORDED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_recorded_deploy_reads_back_typed_and_dumps_as_written(path: Path) -> None:
    result = read_deploy(path)
    assert result is not None and result.acted
    assert result.model_dump(mode="json", exclude_unset=True) == json.loads(path.read_text())


def test_a_kept_ngram_deploy_reads_as_the_deploy_wrote_it() -> None:
    result = read_deploy(FIXTURES / "deploy_ngram_kept.json")
    assert result is not None and result.kept and result.method == "ngram"
    assert result.after is not None and result.after.drafts == 1.0 and result.downtime_s == 25.3
    assert headline({}, result).startswith("deployed (n-gram speculation kept: speedup 0.80x")


def test_a_deploy_from_before_a_field_existed_reads_with_its_default() -> None:
    result = read_deploy(FIXTURES / "deploy_first_shape.json")
    assert result is not None and result.share_drafter is None and result.downtime_s is None
    assert result.before is not None and result.before.acceptance_rate is None and result.method == "eagle3"
    lines = "\n".join(deploy_lines(result))
    assert "**Drafter rolled back:** mean acceptance length 1.06" in lines and "was down" not in lines
    assert (
        "| with the drafter | 8.600 | 1.060 | n/a | 8 |" in lines
        and "Production runs: `/usr/bin/vllm serve /models/target --port 8000`" in lines
    )


def test_no_deploy_reads_as_none_and_a_damaged_one_is_refused_in_a_paragraph(tmp_path: Path) -> None:
    assert read_deploy(tmp_path / DEPLOY_FILE) is None
    (tmp_path / DEPLOY_FILE).write_text('{"kept": "perhaps", "reason": "x"}')
    with pytest.raises(EyasError) as refused:
        read_deploy(tmp_path / DEPLOY_FILE)
    said = str(refused.value)
    assert said.startswith(f"{tmp_path / DEPLOY_FILE} is not a deploy's result (kept: ")
    assert "drop_in: Field required" in said and "Restore it from a copy, or delete it" in said
    assert "\n" not in said


def test_a_damaged_deploy_is_listed_as_damage_and_the_html_report_lists_it_as_missing(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    shutil.copytree(EXAMPLES / "full-pipeline", run)
    (run / DEPLOY_FILE).write_text("{}")
    [listed] = runs_listing(tmp_path, time.time())
    assert listed["state"] == "damaged" and "is not a deploy's result" in listed["damage"], listed
    record = load_record(run)
    assert record.deploy is None
    assert any(line.startswith(f"{run / DEPLOY_FILE} is not a deploy's result") for line in record.missing)
    shutil.copy(FIXTURES / "deploy_ngram_kept.json", run / DEPLOY_FILE)
    kept = load_record(run).deploy
    assert kept is not None and kept.kept and kept.restart_s == 24.8
