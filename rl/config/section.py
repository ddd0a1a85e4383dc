"""The base of every config section, and errors located at the key that caused them."""
from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


Loc = tuple[str | int, ...]


def raise_at(model_name: str, problems: list[tuple[Loc, str, Any]]) -> None:
    """Raise collected (key path, message, value) problems as one ValidationError located at those keys."""
    if not problems:
        return
    # A ValidationError raised inside a validator keeps its locations (prefixed with the field's), which is
    # what lets a recipe error point at the exact line of the offending key rather than at its section.
    details = [
        InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": msg}), loc=loc, input=value)
        for loc, msg, value in problems
    ]
    raise ValidationError.from_exception_data(model_name, details)


def fail_at(model_name: str, loc: Loc, message: str, value: Any) -> NoReturn:
    """Raise one problem located at a key path."""
    raise_at(model_name, [(loc, message, value)])
    raise AssertionError("raise_at returned with a problem")


class Section(BaseModel):
    """Base of every config section: unknown keys are errors and assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
