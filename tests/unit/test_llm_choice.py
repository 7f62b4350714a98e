"""Which LLM the agent uses without an [agent] section: production's own server when it serves a capable model (its
name says so, or the config.json of the directory it loaded), with production's API key; else the embedded model,
and research is skipped. The run's first line says which, and why; `[target] agent_llm = false` opts out.

Stand-in: production's vLLM serving a capable model is tests/support/openai_stub.py (real HTTP, the openai SDK), as
no model able to research runs here. Its /v1/models answers as vLLM's does, naming the directory it loaded; that
directory and its config.json are real files read through the real local host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eyas.agents.llm import open_llm
from eyas.agents.llm_choice import choose_llm
from eyas.graph.phases.research.node import research_llm
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import AgentConfig, EyasConfig, HostConfig, TargetConfig
from openai_stub import OpenAIStub
from stub_http import HEALTHY, stub_server

KEY_ENV = "EYAS_TEST_PRODUCTION_KEY"
# Kimi-K2's shape, a MoE (8 routed experts and 1 shared a token): 61 x (4 h^2 + 3 h x 9 x 2048) + vocab x h = 37.9B.
KIMI = {"hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840, "moe_intermediate_size": 2048,
        "n_routed_experts": 384, "num_experts_per_tok": 8, "n_shared_experts": 1}  # fmt: skip
# SmolLM2-135M's shape: 30 x (4 h^2 + 3 h x 1536) + vocab x h = 148M (its tied embeddings counted as an lm_head).
SMOLLM2 = {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "intermediate_size": 1536}


def config(base_url: str, model: str, **target: Any) -> EyasConfig:
    host = HostConfig(address="local", python="/usr/bin/python3", workdir="/tmp/eyas-test-llm-choice")
    production = TargetConfig(base_url=base_url, model=model, **{"api_key_env": KEY_ENV, **target})
    return EyasConfig(hosts={"local": host}, target=production)


def listing(model: str, root: Path) -> bytes:
    """/v1/models as vLLM answers it: the served name, and the directory it loaded."""
    return json.dumps({"object": "list", "data": [{"id": model, "root": str(root), "max_model_len": 8192}]}).encode()


def never_opened() -> LocalHost:
    """The host, where a choice must not need it: a chat with [agent] starts without connecting to it."""
    raise AssertionError("the host was opened, though the model's name or [agent] decides")


def model_dir(tmp_path: Path, shape: dict[str, int]) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(shape))
    return folder


def test_production_serving_a_capable_model_is_the_agents_llm_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "production-key-0123")
    with OpenAIStub() as production:
        base = production.url.removesuffix("/v1")
        choice = choose_llm(config(base, "Qwen/Qwen2.5-72B-Instruct"), HttpClient(), never_opened)
        assert choice.source == "production" and choice.capable and choice.sampling == {}
        assert choice.agent == AgentConfig(
            base_url=production.url, model="Qwen/Qwen2.5-72B-Instruct", api_key_env=KEY_ENV
        )
        assert "about 72B parameters (its name)" in choice.why and "agent_llm = false" in choice.why
        llm = open_llm(choice)
        llm.complete(llm.request([{"role": "user", "content": "hello"}], 8))
        assert production.authorizations == ["Bearer production-key-0123"]


def test_a_name_without_a_size_is_sized_from_the_directory_production_loaded(tmp_path: Path) -> None:
    with OpenAIStub(models=listing("kimi", model_dir(tmp_path, KIMI))) as production:
        choice = choose_llm(config(production.url.removesuffix("/v1"), "kimi"), HttpClient(), LocalHost)
    assert choice.source == "production"
    assert "it serves kimi, about 37.9B parameters (its config.json, counting the parameters a token" in choice.why


def test_a_small_model_leaves_the_embedded_one_and_research_is_skipped_with_the_reason(tmp_path: Path) -> None:
    with OpenAIStub(models=listing("small", model_dir(tmp_path, SMOLLM2))) as production:
        run = NoteTaker(config(production.url.removesuffix("/v1"), "small"))
        assert research_llm(run) is None  # type: ignore[arg-type]
    assert production.authorizations == []  # not one request reached production as the agent
    (note,) = run.notes
    assert note.startswith("research: skipped; the agent's LLM would be SmolLM2-135M-Instruct at http://127.0.0.1:")
    assert "production serves small, about 148M parameters (its config.json" in note and "too few" in note
    assert "set an [agent] section in the config" in note


def test_the_run_says_first_which_llm_researches() -> None:
    with OpenAIStub() as production:
        run = NoteTaker(config(production.url.removesuffix("/v1"), "meta-llama/Llama-3.1-70B-Instruct"))
        choice = research_llm(run)  # type: ignore[arg-type]
    assert choice is not None and choice.source == "production"
    assert run.notes == [f"research: the agent's LLM is {choice.shown()}"]
    assert run.notes[0].startswith(
        f"research: the agent's LLM is meta-llama/Llama-3.1-70B-Instruct at {production.url} "
    )


def test_the_operator_keeps_the_agent_off_production() -> None:
    with OpenAIStub() as production:
        settings = config(production.url.removesuffix("/v1"), "Qwen/Qwen2.5-72B-Instruct", agent_llm=False)
        choice = choose_llm(settings, HttpClient(), LocalHost)
    assert choice.source == "embedded" and "[target] agent_llm = false keeps the agent off production" in choice.why


def test_a_production_that_does_not_answer_leaves_the_embedded_model_and_says_why() -> None:
    choice = choose_llm(config("http://127.0.0.1:9", "kimi"), HttpClient(), LocalHost)
    assert choice.source == "embedded"
    assert "production's size is unknown (its name states none, and http://127.0.0.1:9 did not answer" in choice.why


def test_an_agent_section_wins() -> None:
    agent = AgentConfig(base_url="https://api.example.com/v1", model="gpt-5.1")
    settings = config("http://127.0.0.1:9", "Qwen/Qwen2.5-72B-Instruct").model_copy(update={"agent": agent})
    choice = choose_llm(settings, HttpClient(), never_opened)
    assert choice.agent == agent and choice.source == "config"


@dataclass
class NoteTaker:
    """What research_llm reads of a RunContext (the config, the HTTP client, the host) and the notes it says."""

    config: EyasConfig
    http: HttpClient = field(default_factory=HttpClient)
    host: LocalHost = field(default_factory=LocalHost)
    notes: list[str] = field(default_factory=list)

    def on_note(self, message: str) -> None:
        self.notes.append(message)


def test_production_behind_a_key_the_agent_was_not_given_leaves_the_embedded_model() -> None:
    """Production's unit holds the key (eyas's own requests read it there), but without [target] api_key_env the
    agent's client has none: every request would get 401, so the embedded model is used, and the reason names the
    fix. Stand-in: tests/support/stub_http.py refusing /v1 without the key, as vLLM's --api-key does."""
    with stub_server(HEALTHY, key="unit-only-key") as url:
        choice = choose_llm(config(url, "Qwen/Qwen2.5-72B-Instruct", api_key_env=None), HttpClient(), never_opened)
    assert choice.source == "embedded"
    assert "wants an API key the agent has not been given (name it with [target] api_key_env)" in choice.why
