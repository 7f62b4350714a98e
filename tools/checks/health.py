"""Deep health check of the target server, in tiers: a model listing alone proves nothing,
so the check ends with a real completion under a deadline and reads the server's metrics."""

from __future__ import annotations

from typing import Any

from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.checks.service import production_headers
from eyas.tools.checks.vllm_metrics import summarize_vllm_metrics
from eyas.tools.hosts.http import HttpError

PROBE_PROMPT = "Reply with one short sentence: what is 2 + 2?"


def _fail(tier: str, message: str, facts: dict[str, Any]) -> CheckResult:
    facts["failed_tier"] = tier
    return CheckResult(name="health", status=Status.FAIL, message=message, facts=facts)


def check_health(ctx: CheckContext) -> CheckResult:
    base = ctx.target.base_url
    headers = production_headers(ctx)
    facts: dict[str, Any] = {"base_url": base}
    try:
        facts["tcp_connect_ms"] = round(ctx.http.tcp_connect(base) * 1000, 1)
    except HttpError as exc:
        return _fail("tcp", f"Nothing accepts connections at {base} ({exc}); is the server running?", facts)

    try:
        health = ctx.http.get(f"{base}/health", headers=headers)
        facts["health_status"] = health.status
        if health.status != 200:
            return _fail("health", f"GET /health answered HTTP {health.status}; the engine is not healthy.", facts)

        listing = ctx.http.get(f"{base}/v1/models", headers=headers)
        if listing.status == 401:
            return _fail("models", refused_key(headers is not None), facts)
        models = [entry["id"] for entry in listing.json().get("data", [])]
        facts["models"] = models
        if ctx.target.model not in models:
            return _fail(
                "models",
                f"The server lists {models or 'no models'}, not '{ctx.target.model}'; fix target.model in the config.",
                facts,
            )

        completion = ctx.http.post_json(
            f"{base}/v1/chat/completions",
            {
                "model": ctx.target.model,
                "messages": [{"role": "user", "content": PROBE_PROMPT}],
                "max_tokens": 8,
                "temperature": 0,
            },
            headers=headers,
            timeout=ctx.target.generation_deadline_s,
        )
        generation = _generation_facts(completion.status, completion.json(), completion.duration_s)
        facts["generation"] = generation
        if completion.status != 200 or not generation["completion_tokens"]:
            return _fail(
                "generation",
                f"The server lists the model but does not generate (HTTP {completion.status}): "
                f"{generation.get('error') or 'empty completion'}.",
                facts,
            )
    except HttpError as exc:
        return _fail("http", f"The server stopped answering mid-check: {exc}.", facts)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return _fail("protocol", f"The server at {base} answered something that is not the OpenAI API: {exc}", facts)

    return _with_metrics(ctx, base, headers, facts)


def refused_key(sent: bool) -> str:
    """Why production answered 401, and the fix, in one paragraph."""
    if sent:
        return (
            "The server refuses eyas's API key (HTTP 401): the key eyas sent (target.api_key_env where eyas runs, else "
            "--api-key or VLLM_API_KEY in production's unit) is not the one it serves with. Fix the variable, or unset "
            "target.api_key_env so that eyas takes the unit's own."
        )
    return (
        "The server wants an API key (HTTP 401) and eyas found none: production's unit gives vLLM no --api-key or "
        "VLLM_API_KEY that eyas can read (an EnvironmentFile= is not read). Set target.api_key_env to the name of a "
        "variable holding the key where eyas runs, and export it."
    )


def _generation_facts(status: int, body: Any, duration_s: float) -> dict[str, Any]:
    if status != 200:
        error = body.get("error", body) if isinstance(body, dict) else body
        return {"completion_tokens": 0, "error": str(error)[:300], "latency_s": round(duration_s, 3)}
    choice = body["choices"][0]
    return {
        "completion_tokens": body.get("usage", {}).get("completion_tokens", 0),
        "text": choice["message"]["content"],
        "finish_reason": choice.get("finish_reason"),
        "latency_s": round(duration_s, 3),
    }


def _with_metrics(ctx: CheckContext, base: str, headers: dict[str, str] | None, facts: dict[str, Any]) -> CheckResult:
    latency = facts["generation"]["latency_s"]
    message = f"'{ctx.target.model}' listed and generating ({latency:.2f} s for a short completion)"
    try:
        scraped = ctx.http.get(f"{base}/metrics", headers=headers)
        if scraped.status != 200:
            raise HttpError(f"HTTP {scraped.status}")
        metrics = summarize_vllm_metrics(scraped.body)
    except (HttpError, ValueError) as exc:
        return CheckResult(
            name="health", status=Status.WARN, message=f"{message}; /metrics unreadable ({exc})", facts=facts
        )
    facts["metrics"] = metrics.model_dump()
    if metrics.spec_decode is not None:
        message += "; speculative decoding counters present"
    return CheckResult(name="health", status=Status.OK, message=message, facts=facts)
