"""What the served model says of itself: its name and model directory (/v1/models) and the context it takes, and the
run's sizes checked against that context, so that a run whose every request would be refused never starts."""

from __future__ import annotations

from pydantic import BaseModel, Field

from eyas.tools.errors import EyasError
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.launch.unit_file import UnitFile
from eyas.tools.planning.model_config import MeasureError
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.settings.config import TargetConfig
from eyas.tools.settings.sizes import (
    MIN_PROMPT_TOKENS,
)


class ServerDown(MeasureError):
    """The server did not answer its model listing: stopped, or still loading. A plan can still be made from
    target.model_dir, with the rates assumed (`measure_inputs(..., server_down=why)`)."""


class ContextTooShort(EyasError):
    """The run's sizes do not fit the context the server takes: it would refuse every request (HTTP 400)."""


class ServedModel(BaseModel):
    """The model as /v1/models lists it: where the server loaded it from, and the context it serves."""

    root: str
    max_model_len: int | None = None


def served_model(http: HttpClient, target: TargetConfig, headers: dict[str, str] | None) -> ServedModel:
    """The served model's directory (or hub id) and max_model_len, as /v1/models reports them (`headers`: production's
    key, tools/checks/service.production_headers); ServerDown when the server does not answer (stopped, loading),
    MeasureError when it answers without the model."""
    url = f"{target.base_url}/v1/models"
    try:
        listing = http.get(url, headers=headers)
    except HttpError as exc:
        raise ServerDown(f"{target.base_url} did not answer ({exc})") from None
    if listing.status >= 500:
        raise ServerDown(f"{url} answered HTTP {listing.status}") from None
    try:
        entries = {entry["id"]: entry for entry in listing.json()["data"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise MeasureError(
            f"{url} answered HTTP {listing.status} with no model listing ({exc}): is it vLLM, and does it want an API "
            "key its unit does not give (set target.api_key_env)? Or give --hidden-size, --num-layers and "
            "--vocab-size instead."
        ) from None
    entry = entries.get(target.model)
    if entry is None:
        raise MeasureError(f"{target.base_url} serves {sorted(entries)}, not {target.model!r}: fix target.model.")
    length = entry.get("max_model_len")
    return ServedModel(
        root=str(entry.get("root") or target.model),
        max_model_len=length if isinstance(length, int) and length > 0 else None,
    )


class Context(BaseModel):
    """The longest sequence (prompt and answer) the server takes, and where that figure comes from."""

    tokens: int = Field(gt=0)
    source: str


def served_context(
    served: ServedModel | None, unit: UnitFile | None, dims: ModelDims | None, target: TargetConfig
) -> Context | None:
    """The served max_model_len (/v1/models), else production's --max-model-len (its unit: the server is down),
    else what vLLM derives from config.json when the launch sets none; None when nothing says."""
    if served is not None and served.max_model_len:
        return Context(tokens=served.max_model_len, source=f"the max_model_len {target.base_url}/v1/models serves")
    flag = unit.vllm.max_model_len if unit is not None and unit.vllm is not None else None
    if flag:
        return Context(tokens=flag, source="production's --max-model-len (its unit)")
    if dims is not None and dims.default_max_model_len:
        return Context(
            tokens=dims.default_max_model_len,
            source="the max_model_len vLLM derives from config.json (production's unit sets no --max-model-len)",
        )
    return None


def context_problem(max_tokens: int, max_seq_len: int, context: Context) -> str | None:
    """Why the run's sizes do not fit the served context, with the fix, in one paragraph; None when they do. vLLM
    refuses (HTTP 400) a request whose prompt and max_tokens are over max_model_len; the data phase keeps prompts
    of up to what max_seq_len leaves beside max_tokens."""
    limit = context.tokens
    raise_it = (
        f"or raise production's --max-model-len to at least {max_seq_len:,} (in its unit's ExecStart, then restart it)"
    )
    if max_tokens + MIN_PROMPT_TOKENS > limit:
        return (
            f"max_tokens {max_tokens:,} (--max-tokens) leaves no room for a prompt in the context the server takes: "
            f"{limit:,} tokens, "
            f"{context.source}. vLLM refuses every request whose prompt plus max_tokens is over it (HTTP 400), so "
            f"generation would fail for every sample and the run would have no data. Lower max_tokens to at most "
            f"{max(1, limit - MIN_PROMPT_TOKENS):,} and max_seq_len (--max-seq-len) to at most {limit:,}, {raise_it}."
        )
    if max_seq_len > limit:
        return (
            f"max_seq_len {max_seq_len:,} (--max-seq-len) is above the context the server takes: {limit:,} tokens, "
            f"{context.source}. The data phase keeps prompts of up to what max_seq_len leaves beside max_tokens "
            f"{max_tokens:,}, and vLLM refuses (HTTP 400) every request whose prompt and answer are over {limit:,}. "
            f"Lower max_seq_len to at most {limit:,}, {raise_it}."
        )
    return None
