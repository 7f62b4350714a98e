"""The agent LLM: any OpenAI-compatible endpoint (OpenAI, a vLLM server, the embedded target) via the openai SDK.

Every request crosses the run's `Boundary` as one "llm" event, so runs are recorded and replayed like any
other. Retries of 429/5xx/timeouts happen inside the crossing, by `tools/retry.py`'s policy (a replay hands back
the final answer at once); a bad answer gets one repair round (the model is told what was wrong), which is a
crossing of its own.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from eyas.agents.llm_answer import MAX_ANSWER_BYTES, NotTheApi, compact_answer
from eyas.agents.llm_choice import LlmChoice
from eyas.agents.llm_retry import Busy, RetryPolicy
from eyas.agents.structured import (
    BadCalls,
    Message,
    OutputProblem,
    Tool,
    ToolMode,
    Turn,
    action_format,
    parse_guided,
    parse_native,
    parse_structured,
    render_guided,
    response_format,
    tool_result,
    tool_spec,
)
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.deadline_transport import AnswerTooLarge, deadline_client
from eyas.tools.recording.boundary import Boundary
from eyas.tools.recording.transcript import register_error_type
from eyas.tools.retry import Failures, GaveUp, retry
from eyas.tools.settings.config import AgentConfig, secret

if TYPE_CHECKING:
    from openai import APIStatusError


@cache
def _sdk_fields() -> frozenset[str]:
    """Request fields the SDK takes as arguments; any other (a vLLM sampling field) travels in extra_body."""
    from openai.resources.chat.completions import Completions  # here, not at start-up of every eyas process

    return frozenset(inspect.signature(Completions.create).parameters) - {"self", "extra_body"}


M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
# A keyless server (a local vLLM) still needs some key for the SDK to send a request.
DUMMY_KEY = "EMPTY"
DEFAULT_CONTEXT_TOKENS = 32768


class LlmError(EyasError):
    """The agent LLM could not give a usable answer."""


@register_error_type
class LlmUnavailable(LlmError):
    """No answer after the bounded retries: server down, overloaded, or too slow."""


@register_error_type
class LlmRejected(LlmError):
    """The server refused the request (4xx): wrong key, model, URL, or a prompt too long."""


@register_error_type
class LlmToolsUnsupported(LlmRejected):
    """The server has no tool-call parser (vLLM without --enable-auto-tool-choice): use guided output."""


@register_error_type
class LlmNotApi(LlmError):
    """The endpoint answered something that is not the API's JSON: a web page, a cut body, an endless reply."""


@register_error_type
class LlmBadOutput(LlmError):
    """The model's answer was unusable twice: before and after being told what was wrong."""


class Usage:
    """Tokens spent in one run, summed over every call from every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add(self, usage: dict[str, Any] | None) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += int((usage or {}).get("prompt_tokens") or 0)
            self.completion_tokens += int((usage or {}).get("completion_tokens") or 0)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {
                "calls": self.calls,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            }


class LlmProfile(BaseModel):
    """What the server can do, found once per run (and kept in the run's state, so every branch agrees)."""

    tool_mode: ToolMode
    context_tokens: int


def open_llm(choice: LlmChoice, **options: Any) -> LLM:
    """The client of the chosen LLM (agents/llm_choice.py), with its sampling unless `options` say otherwise."""
    return LLM(choice.agent, **{"sampling": choice.sampling, **options})


class _Ping(BaseModel):
    """Answer nothing; this tool only tests whether the server accepts tools."""


class LLM:
    def __init__(
        self,
        config: AgentConfig,
        *,
        boundary: Boundary | None = None,
        clock: Clock = SYSTEM_CLOCK,
        usage: Usage | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 180.0,
        sampling: dict[str, Any] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        """`clock` paces the retries inside a crossing: pass a live clock, never a recording one.
        `sampling`: extra request fields sent every time (temperature, vLLM's repetition_penalty, ...).
        `on_retry` hears, in one line, why a request is tried again, so a slow server never looks like a hang."""
        self.on_retry = on_retry
        self.config = config
        self.boundary = boundary or Boundary()
        self.usage = usage or Usage()
        self.retry = retry or RetryPolicy()
        self.sampling = sampling or {}
        self._clock = clock
        self._timeout_s = timeout_s
        from openai import OpenAI  # here, not at start-up of every eyas process (openai takes ~0.4 s)

        # The deadline client makes `timeout_s` bound each whole answer, not each read of it. openai types the
        # argument as its own httpx2 client, and takes an httpx one too (checked when it is constructed).
        self._client = OpenAI(
            base_url=config.base_url,
            api_key=secret(config.api_key_env) or DUMMY_KEY,
            max_retries=0,
            timeout=timeout_s,
            http_client=deadline_client(MAX_ANSWER_BYTES),  # type: ignore[arg-type]
        )

    @property
    def model(self) -> str:
        return self.config.model

    def profile(self) -> LlmProfile:
        """Ask the server whether it takes tools and how long its context is (two small requests)."""
        ping = self.request([{"role": "user", "content": "ping"}], 16, tools=[tool_spec(_Ping)])
        try:
            self.complete(ping)
            mode: ToolMode = "native"
        except LlmToolsUnsupported:
            mode = "guided"
        return LlmProfile(tool_mode=mode, context_tokens=self._context_tokens())

    def request(self, messages: list[Message], max_tokens: int, **extra: Any) -> dict[str, Any]:
        """The whole call as JSON: what the transcript records and a replay compares."""
        return {
            "model": self.model,
            "messages": messages,
            "max_completion_tokens": max_tokens,
            **self.sampling,
            **extra,
        }

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """One chat completion, retried on 429/5xx/timeouts; the compact answer as JSON."""
        answer = self.boundary.cross("llm", {"request": request}, lambda: {"response": self._perform(request)})
        response: dict[str, Any] = answer["response"]
        self.usage.add(response.get("usage"))
        return response

    def structured(self, messages: list[Message], model: type[M], *, max_tokens: int) -> M:
        """An answer that is an instance of `model` (guided by its JSON schema)."""
        fmt = response_format(model)

        def ask(conversation: list[Message]) -> dict[str, Any]:
            return self.complete(self.request(conversation, max_tokens, response_format=fmt))

        def parse(answer: dict[str, Any], _: list[Message]) -> M:
            message, finish = _first_choice(answer)
            return parse_structured(message.get("content"), model, finish)

        return self._with_repair(messages, ask, parse, f"a {model.__name__}")

    def step(self, messages: list[Message], tools: list[Tool], *, mode: ToolMode, max_tokens: int) -> Turn:
        """One assistant turn that may call `tools`; arguments come back validated into their models."""
        if mode == "native":
            specs = [tool_spec(tool) for tool in tools]

            def ask(conversation: list[Message]) -> dict[str, Any]:
                return self.complete(self.request(conversation, max_tokens, tools=specs))

            def parse(answer: dict[str, Any], conversation: list[Message]) -> Turn:
                return parse_native(_first_choice(answer)[0], tools)

        else:
            fmt = action_format(tools, max_tokens)

            def ask(conversation: list[Message]) -> dict[str, Any]:
                guided = render_guided(conversation, tools)
                return self.complete(self.request(guided, max_tokens, response_format=fmt))

            def parse(answer: dict[str, Any], conversation: list[Message]) -> Turn:
                message, finish = _first_choice(answer)
                return parse_guided(message.get("content"), tools, len(conversation), finish)

        return self._with_repair(messages, ask, parse, "a tool call or an answer")

    def _with_repair(
        self,
        messages: list[Message],
        ask: Callable[[list[Message]], dict[str, Any]],
        parse: Callable[[dict[str, Any], list[Message]], T],
        wanted: str,
    ) -> T:
        answer = ask(messages)
        try:
            return parse(answer, messages)
        except OutputProblem as problem:
            repaired = [*messages, *_repair_messages(_first_choice(answer)[0], problem)]
        second = ask(repaired)
        try:
            return parse(second, repaired)
        except OutputProblem as problem:
            raise LlmBadOutput(
                f"The agent model {self.model} at {self.config.base_url} gave no usable answer ({wanted}), even "
                f"after being told what was wrong: {problem} A more capable model is one [agent] section away "
                "in the config."
            ) from None

    def _perform(self, request: dict[str, Any]) -> dict[str, Any]:
        def heard(failures: Failures, _wait: float) -> None:
            if self.on_retry is not None:
                self.on_retry(
                    f"the agent LLM at {self.config.base_url}: {failures.last}; trying again "
                    f"({failures.tries + 1} of {self.retry.most(failures)})"
                )

        try:
            return retry(
                lambda: self._try(request), on=(Busy,), wait_s=self.retry.wait_s, give_up=self.retry.gives_up,
                sleep=self._clock.sleep, before_sleep=heard,
            )  # fmt: skip
        except GaveUp as out:
            raise LlmUnavailable(
                f"The agent LLM at {self.config.base_url} gave no answer in {out.failures.tries} tries (last: "
                f"{out.failures.last}). Check that the server is up (for the embedded default: `eyas target up`) "
                "and not overloaded, or point [agent] in the config at another endpoint."
            ) from None

    def _try(self, request: dict[str, Any]) -> dict[str, Any]:
        """One try: the answer, Busy when another try could succeed, the reason as an LlmError when none could."""
        from openai import APIConnectionError, APIStatusError, APITimeoutError, InternalServerError, RateLimitError

        sdk_fields = _sdk_fields()
        try:
            known = {key: value for key, value in request.items() if key in sdk_fields}
            extra = {key: value for key, value in request.items() if key not in sdk_fields}
            raw = self._client.chat.completions.with_raw_response.create(**known, extra_body=extra or None)
            return compact_answer(raw)
        except NotTheApi as exc:
            raise self._not_api(str(exc)) from None
        except (RateLimitError, InternalServerError) as exc:
            raise Busy(f"HTTP {exc.status_code}: {_detail(exc)}", retry_after=_retry_after(exc)) from None
        except APITimeoutError:
            raise Busy(f"no complete answer within {self._timeout_s:g} s", timed_out=True) from None
        except APIConnectionError as exc:
            if isinstance(exc.__cause__, AnswerTooLarge):
                raise self._not_api(str(exc.__cause__)) from None
            raise Busy(f"{type(exc).__name__}: {exc}") from None
        except APIStatusError as exc:
            raise self._rejected(exc, request) from None

    def _not_api(self, came_back: str) -> LlmNotApi:
        return LlmNotApi(
            f"The agent LLM at {self.config.base_url} answered something that is not the chat completions API's JSON "
            f"({came_back}). Check that this endpoint is an OpenAI-compatible server's /v1 (not a web page, a login "
            "proxy or another service): set base_url in the config's [agent] section (the chat uses production's "
            "otherwise)."
        )

    def _rejected(self, exc: APIStatusError, request: dict[str, Any]) -> LlmRejected:
        detail = _detail(exc)
        where = f"The agent LLM at {self.config.base_url} refused the request (HTTP {exc.status_code}: {detail})."
        if exc.status_code == 400 and "tools" in request and "tool" in detail.lower():
            return LlmToolsUnsupported(f"{where} It has no tool-call parser; eyas uses guided JSON output instead.")
        if exc.status_code in (401, 403):
            env = self.config.api_key_env or "an api_key_env"
            return LlmRejected(f"{where} Set {env} to a valid key for this endpoint.")
        if exc.status_code == 404:
            return LlmRejected(f"{where} Check [agent] base_url (it ends in /v1) and model ({self.model}).")
        return LlmRejected(f"{where} A prompt too long for the model's context is the usual cause.")

    def _context_tokens(self) -> int:
        from openai import APIConnectionError, APIStatusError, APITimeoutError

        def perform() -> dict[str, Any]:
            try:
                models = self._client.models.list().data
                lengths = [getattr(m, "max_model_len", None) for m in models if m.id == self.model]
            # The listing is optional, and a proxy may answer it with a page: the default context is used then.
            except (APIStatusError, APITimeoutError, APIConnectionError, AttributeError, TypeError, ValueError):
                return {"response": None}
            return {"response": {"max_model_len": lengths[0] if lengths else None}}

        answer = self.boundary.cross("llm", {"request": {"op": "models"}}, perform)["response"]
        return int((answer or {}).get("max_model_len") or DEFAULT_CONTEXT_TOKENS)


def _first_choice(answer: dict[str, Any]) -> tuple[Message, str | None]:
    choices = answer.get("choices") or [{"message": {}, "finish_reason": None}]
    return choices[0]["message"] or {}, choices[0].get("finish_reason")


def _repair_messages(message: Message, problem: OutputProblem) -> list[Message]:
    """The bad answer and what was wrong with it, in the shape the conversation needs."""
    if isinstance(problem, BadCalls):
        bad = dict(problem.problems)
        calls = problem.message.get("tool_calls") or []
        results = [tool_result(call["id"], _call_problem(bad.get(call["id"]))) for call in calls]
        assistant = {"role": "assistant", "content": problem.message.get("content"), "tool_calls": calls}
        return [assistant, *results]
    return [
        {"role": "assistant", "content": message.get("content") or ""},
        {"role": "user", "content": f"{problem} Try again."},
    ]


def _call_problem(problem: str | None) -> str:
    if problem is None:
        return "Not run: another call of this turn was invalid. Send all the calls again, corrected."
    return f"Error: {problem} Send all the calls again, corrected."


def _detail(exc: APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:500]
    return str(exc.message)[:500]


def _retry_after(exc: APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
