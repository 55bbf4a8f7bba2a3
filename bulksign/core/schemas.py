"""Shapes the pydantic models of every layer share: text the database can hold, fields left out of a multipart
form rather than null."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

#: Largest id of a table with 32-bit ids (batches, templates, teams) and of one with 64-bit ids (requests).
MAX_ID, MAX_BIG_ID = 2**31 - 1, 2**63 - 1
#: Text the database can hold: no NUL character (PostgreSQL text refuses it).
NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, Field(pattern=NO_NUL)]
#: The default of a field left out rather than null (``no_null_defaults``): None, typed Any so the field keeps the
#: type its schema shows.
ABSENT: Any = None


def no_null_defaults(schema: dict[str, Any]) -> None:
    """For multipart models: optional fields are left out, never null, so the description shows no null default."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]
