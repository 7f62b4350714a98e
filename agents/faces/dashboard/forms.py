"""What a browser posts, checked by pydantic where it enters: a gate's answer form becomes a GateAnswer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eyas.graph.state import Action, GateAnswer
from eyas.tools.settings.sizes import Sizes, SizeValue

SIZE_PREFIX = "size."  # an edit form names each size field `size.<name>`
WHO = "dashboard"


class GateForm(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gate_id: str = Field(min_length=1, max_length=200)
    action: Action
    reason: str = Field("", max_length=2000)
    sizes: dict[str, str] = Field(default_factory=dict, description="an edit's sizes as typed")

    @classmethod
    def parse(cls, form: Mapping[str, Any]) -> GateForm:
        """The form's fields; the CSRF token has been checked and is dropped here."""
        sizes = {
            key.removeprefix(SIZE_PREFIX): str(value) for key, value in form.items() if key.startswith(SIZE_PREFIX)
        }
        fields = {key: value for key, value in form.items() if not key.startswith(SIZE_PREFIX) and key != "csrf"}
        return cls.model_validate({**fields, "sizes": sizes})

    def answer(self, current: Mapping[str, SizeValue]) -> GateAnswer:
        """The answer as `eyas approve` records it, by the dashboard; an edit carries the whole set of sizes,
        checked (a ValidationError names the field that is wrong)."""
        sizes = Sizes.model_validate({**current, **self.sizes}).model_dump() if self.action == "edit" else None
        return GateAnswer(action=self.action, reason=self.reason, who=WHO, sizes=sizes)
