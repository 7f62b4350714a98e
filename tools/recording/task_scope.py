"""Which branch of a run is doing the work: transcripts record it so parallel branches replay in their own order.

The task lives in a context variable, so each thread carries its own. A ThreadPoolExecutor does not copy
the submitter's context into its workers: submit through `submit_in_task` (or `submit_in_context`) instead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

ROOT_TASK = "main"

_task: contextvars.ContextVar[str] = contextvars.ContextVar("eyas_task", default=ROOT_TASK)

P = ParamSpec("P")
T = TypeVar("T")


def current_task() -> str:
    return _task.get()


@contextmanager
def task_scope(name: str) -> Iterator[str]:
    """Run a block as task `name`, nested under the current task ("verify" then "health" is "verify/health")."""
    if not name or "/" in name:
        raise ValueError(f"A task name is one non-empty path segment without '/', got {name!r}")
    parent = _task.get()
    token = _task.set(name if parent == ROOT_TASK else f"{parent}/{name}")
    try:
        yield _task.get()
    finally:
        _task.reset(token)


def submit_in_context(pool: Executor, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """Submit `fn` to run in a copy of the caller's context (so in the caller's task)."""
    context = contextvars.copy_context()

    def run() -> T:
        return context.run(fn, *args, **kwargs)

    return pool.submit(run)


def submit_in_task(pool: Executor, name: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """Submit `fn` to run as its own task `name`, nested under the caller's task."""

    def scoped() -> T:
        with task_scope(name):
            return fn(*args, **kwargs)

    return submit_in_context(pool, scoped)
