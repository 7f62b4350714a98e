"""The chat's pipeline controls as boundary crossings: each call and its text are recorded, so a chat replays
offline with the run's answers as they were (the controls spawn processes and read run folders, which a
replay must not touch)."""

from __future__ import annotations

from typing import Any

from eyas.agents.operator_tools import GateAction, PipelineControl
from eyas.tools.recording.boundary import Boundary


class BoundaryControl:
    """A PipelineControl whose every call crosses `boundary`: performed by `inner` live, answered on replay."""

    def __init__(self, boundary: Boundary, inner: PipelineControl | None) -> None:
        self._boundary = boundary
        self._inner = inner

    def _call(self, method: str, **args: Any) -> str:
        def perform() -> dict[str, Any]:
            assert self._inner is not None, "a replayed control call is answered from the transcript"
            return {"result": getattr(self._inner, method)(**args)}

        return str(self._boundary.cross("control", {"method": method, "args": args}, perform)["result"])

    def status(self) -> str:
        return self._call("status")

    def start_run(self, sizes: dict[str, int]) -> str:
        return self._call("start_run", sizes=sizes)

    def plan(self, sizes: dict[str, int]) -> str:
        return self._call("plan", sizes=sizes)

    def resume(self) -> str:
        return self._call("resume")

    def answer_gate(self, action: GateAction, reason: str) -> str:
        return self._call("answer_gate", action=action, reason=reason)

    def deploy_effect(self, drafter: str | None, k: int | None) -> str:
        return self._call("deploy_effect", drafter=drafter, k=k)

    def deploy(self, drafter: str | None, k: int | None) -> str:
        return self._call("deploy", drafter=drafter, k=k)

    def rollback_effect(self) -> str:
        return self._call("rollback_effect")

    def rollback(self) -> str:
        return self._call("rollback")
