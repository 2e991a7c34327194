"""Pydantic objects that outlive a release: pickled into Flink state and the action log by one
version, read back by a later one that may have added fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Upgradable(BaseModel):
    """A model pickled before its class gained a field comes back with that field's default
    (pydantic restores ``__dict__`` as it was pickled, and an absent field would be an
    ``AttributeError`` on first use)."""

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        fields = type(self).model_fields
        values = self.__dict__
        if len(values) < len(fields):
            for name, field in fields.items():
                if name not in values and not field.is_required():
                    values[name] = field.get_default(call_default_factory=True)
