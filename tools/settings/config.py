"""The configuration file: one TOML file, validated by pydantic, secrets only through env vars."""

from __future__ import annotations

import os
import posixpath
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from eyas.tools.errors import ConfigError
from eyas.tools.settings.fields import AbsolutePath, HttpUrl, ModelName, Seconds, WholeNumber
from eyas.tools.settings.local_files import MISSING, UnreadableFile, not_a_regular_file, read_text_file
from eyas.tools.settings.sizes import SIZE_LIMITS, known_prompt_source
from eyas.tools.settings.units import parse_size  # the one size syntax of eyas

LOCAL = "local"


def _not_root(value: str) -> str:
    """workdir holds eyas's jobs, data and checkpoints, and eyas removes folders it made under it: never `/`."""
    if posixpath.normpath(value).strip("/") == "":
        raise ValueError(
            f"is the root folder ({value!r}); eyas keeps jobs, data and checkpoints under workdir and removes the "
            "folders it made there, so give it a folder of its own, e.g. /data/eyas"
        )
    return value


SSH_KEEPALIVE_S = 30.0  # HostConfig.keepalive_s


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HostConfig(_Section):
    """A machine eyas acts on: `local`, or an SSH address."""

    address: str = Field(
        description='"local" for this machine, else a hostname, IP or ~/.ssh/config Host reached over SSH'
    )
    port: WholeNumber = Field(22, ge=1, le=65535)
    user: str | None = None
    key_file: str | None = Field(None, description="private key; default: ssh-agent and ~/.ssh keys")
    key_passphrase_env: str | None = Field(None, description="env var holding key_file's passphrase, if it has one")
    known_hosts: str = Field("~/.ssh/known_hosts", description="host keys trusted for this host")
    python: AbsolutePath = Field(description="the ML environment's interpreter (vllm, speculators, torch)")
    workdir: Annotated[AbsolutePath, AfterValidator(_not_root)] = Field(
        description="where eyas keeps jobs, data and checkpoints on the host"
    )
    keepalive_s: Seconds = Field(
        SSH_KEEPALIVE_S,
        le=3600,
        description="seconds between SSH keepalives on the connection eyas keeps open: a connection the network "
        "dropped is noticed after a few of them, and eyas reconnects",
    )
    hub_offline: bool = Field(
        False,
        description="the host cannot (or must not) reach the Hugging Face hub: its jobs run with HF_HUB_OFFLINE=1, "
        "so a pipeline.drafter_base given as a hub id is refused at download (copy the drafter to the host and give "
        "its directory). Default false: the download job fetches a hub drafter inside the run",
    )
    hub_endpoint: HttpUrl | None = Field(
        None,
        description="the Hugging Face hub the host's jobs talk to (HF_ENDPOINT): a private hub or a mirror; default: "
        "huggingface_hub's own (https://huggingface.co, or HF_ENDPOINT where the host sets it)",
    )
    hub_token_env: str | None = Field(
        None,
        description="env var, where eyas runs, holding a hub token with write access for `eyas publish`: it reaches "
        "the job on the host by a file only its owner reads, never a command line; default: the host's own token "
        "(HF_TOKEN, or `hf auth login` there)",
    )

    @property
    def is_local(self) -> bool:
        return self.address == LOCAL


class TargetConfig(_Section):
    """The vLLM server whose model the drafter is trained for."""

    host: str = Field(LOCAL, description="name of the host (in [hosts]) running the server")
    base_url: HttpUrl = Field(description="OpenAI-compatible endpoint as eyas reaches it, without /v1")
    model: ModelName = Field(description="served model name, as listed by /v1/models")
    api_key_env: str | None = Field(None, description="env var holding the server's API key, if any")
    model_dir: AbsolutePath | None = Field(
        None, description="the served model's Hugging Face directory on the host (for extraction and training)"
    )
    unit: str | None = Field(None, description="systemd unit name, e.g. vllm.service")
    unit_file: AbsolutePath | None = Field(None, description="unit file path when systemd cannot be asked")
    trust_remote_code: bool | None = Field(
        None,
        description="run the model directory's own code (auto_map) in extraction and training; default: as the "
        "production unit's vLLM --trust-remote-code",
    )
    generation_deadline_s: Seconds = Field(60.0, description="deadline of the health check's completion")
    load_time_s: Seconds | None = Field(
        None,
        description="seconds the production server takes from start to healthy; default: as measured when eyas last "
        "restarted it, else estimated from the model's size. Plans downtime and the ready timeouts of eyas's servers",
    )
    load_wait_s: float = Field(
        1800.0,
        ge=0,
        allow_inf_nan=False,
        description="how long verify and plan wait for a server that is still loading (0: do not wait)",
    )
    agent_llm: bool = Field(
        True,
        description="without an [agent] section: let the agent (research, `eyas chat`) use this server as its LLM "
        "when it serves a capable model (about 7B parameters or more); false keeps the agent's requests off it",
    )


class AgentConfig(_Section):
    """The LLM that drives research and the operator chat (any OpenAI-compatible endpoint). Without this section the
    target's own server is the agent's LLM when it serves a capable model (agents/llm_choice.py)."""

    base_url: HttpUrl
    model: ModelName
    api_key_env: str | None = Field("OPENAI_API_KEY", description="env var holding the API key")


class PipelineConfig(_Section):
    """Where a run takes its inputs from; sizes are chosen per run (`eyas run --samples ...`)."""

    prompts: Annotated[str, AfterValidator(known_prompt_source)] | None = Field(
        None,
        description="`sharegpt`, `shipped` (eyas's own set) or a prompts JSONL on the host (ShareGPT rows or {id, "
        "prompt}), split into training and held-out prompts; default: the shipped set, or ShareGPT on the embedded "
        "target. `eyas run --prompts` overrides it",
    )
    conversations: AbsolutePath | None = Field(
        None, description="existing generated conversations on the host: the run skips the data phase"
    )
    drafter_base: str | None = Field(
        None, description="a drafter to finetune from: hub repo id (downloaded beside generation) or host directory"
    )
    extraction_backend: Literal["auto", "hf", "vllm"] | None = Field(
        None,
        description="the run size extraction_backend for every run of this config (default: auto, the plan "
        "chooses); `eyas run --extraction-backend` and an edit at the gate override it",
    )
    extraction_mode: Literal["auto", "offline", "online", "hybrid"] | None = Field(
        None,
        description="the run size extraction_mode for every run of this config (default: auto, the plan chooses "
        "offline, hybrid or online by the disk); `eyas run --extraction-mode` and an edit at the gate override it",
    )


# The variable each tracker's library reads its credential from; the job gets the config's token_env under this name.
TRACKER_TOKEN_ENV = {"mlflow": "MLFLOW_TRACKING_TOKEN", "wandb": "WANDB_API_KEY"}


def _no_credentials(value: str) -> str:
    if "@" in value.split("://", 1)[-1].partition("/")[0]:
        raise ValueError(
            "holds credentials (user:password@ before the host), which would reach command lines and logs: remove "
            "them, and put the token in an environment variable named by token_env"
        )
    return value


class TrackingConfig(_Section):
    """MLflow or W&B, where the training job logs its curves and sizes beside the TensorBoard files, when the package
    (mlflow-skinny or wandb) is installed in the host's environment; without it the job says so and goes on."""

    mlflow_uri: Annotated[str, AfterValidator(_no_credentials)] | None = Field(
        None, description="MLflow tracking URI as the host reaches it: http://..., databricks, sqlite:////abs/path"
    )
    experiment: str | None = Field(None, description="the MLflow experiment (default: MLflow's default experiment)")
    wandb_project: str | None = Field(None, description="the Weights & Biases project")
    token_env: str | None = Field(
        None,
        description="env var, where eyas runs, holding the tracker's token: it reaches the training job by a file "
        "only its owner reads, as MLFLOW_TRACKING_TOKEN or WANDB_API_KEY, never on a command line; default: the "
        "host's own environment or login",
    )

    @model_validator(mode="after")
    def _one_tracker(self) -> TrackingConfig:
        if bool(self.mlflow_uri) == bool(self.wandb_project):
            raise ValueError('name one tracker: mlflow_uri = "http://..." or wandb_project = "...", not both or none')
        return self

    @property
    def kind(self) -> Literal["mlflow", "wandb"]:
        return "mlflow" if self.mlflow_uri else "wandb"


JOB_KINDS = ("generate", "download", "extract", "vocab", "train", "evaluate")  # a job id ends in .<kind>


class JobResources(_Section):
    """What one job asks of a Ray cluster (its entrypoint's resources); unset asks nothing, and Ray then runs the
    job on its head node."""

    num_cpus: float | None = Field(None, ge=0, allow_inf_nan=False, description="entrypoint_num_cpus")
    num_gpus: float | None = Field(None, ge=0, allow_inf_nan=False, description="entrypoint_num_gpus")
    memory: int | None = Field(None, ge=0, description="entrypoint_memory, in bytes")
    labels: dict[str, str] = Field(
        default_factory=dict, description="node labels the job must run on (`ray start --labels`), e.g. role=gpu"
    )


class ClusterConfig(_Section):
    """Where jobs run: detached jobs on the target's host (the default), or Ray jobs on a cluster."""

    executor: Literal["detached", "ray"] = Field(
        "detached", description='"detached": setsid jobs on the host; "ray": Ray jobs submitted to ray_address'
    )
    ray_address: HttpUrl | None = Field(
        None, description="the Ray job server (the dashboard's HTTP address, e.g. http://10.0.0.5:8265)"
    )
    runtime_env: dict[str, object] = Field(
        default_factory=dict,
        description="Ray runtime_env entries every job gets (e.g. env_vars); eyas sets working_dir to its workloads",
    )
    resources: dict[str, JobResources] = Field(
        default_factory=dict,
        description="per job kind (generate, download, extract, vocab, train, evaluate): what each job asks of Ray",
    )
    endpoints: list[HttpUrl] = Field(
        default_factory=list,
        description="the target's vLLM servers as the jobs reach them: generation runs one shard per endpoint "
        "(default: one job against target.base_url)",
    )
    extract_shards: WholeNumber = Field(
        1,
        ge=1,
        le=SIZE_LIMITS["extract_shards"],
        description="extraction jobs, one per GPU or node, each with a disjoint share of the samples",
    )
    node_free_disk: str | None = Field(
        None,
        description='free space of each node\'s own data disk (e.g. "3.5TB"), when the nodes have local disks: '
        "the plan then says over how many nodes extraction would fit when the shared storage is too small",
    )
    train_nodes: WholeNumber = Field(
        1,
        ge=1,
        le=SIZE_LIMITS["train_nodes"],
        description="training jobs, one per node, that train one drafter together (PyTorch distributed: gloo on "
        "CPUs, NCCL on GPUs); a failed one fails them all, and a retry relaunches them all from the last checkpoint",
    )

    @model_validator(mode="after")
    def _ray_needs_an_address(self) -> ClusterConfig:
        if self.executor == "ray" and self.ray_address is None:
            raise ValueError('executor = "ray" needs ray_address, the job server, e.g. "http://10.0.0.5:8265"')
        unknown = sorted(set(self.resources) - set(JOB_KINDS))
        if unknown:
            raise ValueError(f"resources names job kinds {unknown}; the kinds are {', '.join(JOB_KINDS)}")
        if self.node_free_disk is not None:
            parse_size(self.node_free_disk)  # a ValueError names the syntax
        if "working_dir" in self.runtime_env:
            raise ValueError("runtime_env.working_dir is eyas's own (its workload scripts); remove it")
        return self


class EyasConfig(_Section):
    hosts: dict[str, HostConfig]
    target: TargetConfig
    agent: AgentConfig | None = None
    pipeline: PipelineConfig = PipelineConfig()
    cluster: ClusterConfig = ClusterConfig()
    tracking: TrackingConfig | None = None

    @model_validator(mode="after")
    def _target_host_is_defined(self) -> EyasConfig:
        if self.target.host not in self.hosts:
            known = ", ".join(sorted(self.hosts)) or "none"
            raise ValueError(f"target.host names '{self.target.host}', which is not in [hosts] (defined: {known})")
        return self

    def host(self, name: str | None = None) -> HostConfig:
        """A host by name; no name means the target's host."""
        key = name or self.target.host
        if key not in self.hosts:
            raise ConfigError(f"No host named '{key}' in the config; defined: {', '.join(sorted(self.hosts))}.")
        return self.hosts[key]


def secret(env_var: str | None) -> str | None:
    """Read a secret from the environment; the config only names the variable."""
    return os.environ.get(env_var) if env_var else None


def secret_values(config: EyasConfig) -> list[str]:
    """Every secret the config points at, so transcripts and logs can redact them."""
    names = [config.target.api_key_env, config.agent.api_key_env if config.agent else None]
    names += [name for host in config.hosts.values() for name in (host.key_passphrase_env, host.hub_token_env)]
    names += [config.tracking.token_env if config.tracking else None]
    return [value for value in (secret(name) for name in names) if value]


def format_validation_error(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field (misspelt? see eyas.example.toml for the fields)"
        problems.append(f"{where}: {message}")
    return problems


def config_problems(path: Path) -> list[str]:
    """Every problem of a config file, each with its field path; empty when the file is valid."""
    try:
        raw = tomllib.loads(path.read_bytes().decode())
    except FileNotFoundError:
        return [f"{path}: no such file (pass an existing config, or omit --config for the embedded default)"]
    except IsADirectoryError:
        return [f"{path}: a folder, not a config file (pass the TOML file; `eyas config init` writes one)"]
    except OSError as exc:
        return [f"{path}: cannot be read ({exc.strerror}); pass a config file you can read"]
    except UnicodeDecodeError as exc:
        return [f"{path}: not UTF-8 text (byte {exc.start}), so not a TOML config; pass the TOML file"]
    except tomllib.TOMLDecodeError as exc:
        return [f"{path}: not valid TOML: {exc} (`eyas config init NEW.toml` writes a valid example)"]
    except RecursionError:
        return [
            f"{path}: nests tables or arrays deeper than Python's TOML reader can follow, so it is no eyas config "
            "(whose tables are two deep); pass the TOML file `eyas config init NEW.toml` writes"
        ]
    try:
        config = EyasConfig.model_validate(raw)
    except ValidationError as exc:
        return format_validation_error(exc)
    return _file_problems(config)


def _file_problems(config: EyasConfig) -> list[str]:
    """Local files the config names that are missing or not what they should be (a directory, a FIFO, a link
    loop, a known_hosts that is not text): found now, each said as what it is, not on the first SSH attempt."""
    problems = []
    for name, host in config.hosts.items():
        if host.is_local:
            continue
        if host.key_file and (problem := not_a_regular_file(Path(host.key_file).expanduser())):
            problems.append(
                f"hosts.{name}.key_file: {host.key_file} on this machine {problem}; point key_file at the private "
                "key file (OpenSSH or PEM, not the .pub), e.g. ~/.ssh/id_ed25519"
            )
        if problem := _known_hosts_problem(Path(host.known_hosts).expanduser()):
            scan = f"ssh-keyscan -p {host.port} {host.address}"
            fix = (
                f"record the host's key with {scan} >> {host.known_hosts}"
                if problem == MISSING
                else f"point known_hosts at a text file of the host keys you trust ({scan} > FILE writes one)"
            )
            problems.append(f"hosts.{name}.known_hosts: {host.known_hosts} {problem}; {fix}")
    return problems


def _known_hosts_problem(path: Path) -> str | None:
    """What keeps `path` from being a known_hosts file ssh and paramiko read: not a regular file, or not text."""
    try:
        read_text_file(path)
    except UnreadableFile as exc:
        return exc.problem
    return None


def load_config(path: Path) -> EyasConfig:
    problems = config_problems(path)
    if problems:
        listed = "; ".join(problems)
        raise ConfigError(
            f"The config {path} has {len(problems)} problem(s): {listed}. Run `eyas config check {path}`."
        )
    return EyasConfig.model_validate(tomllib.loads(path.read_text()))
