"""Who signs as a role other than the recipient: a person from a row's ``<role>_email`` columns (``validation``) or
one fixed party for the whole batch, given on the new-batch form or as the API's ``parties``
(``{"employer": {"email": "...", "name": "..."}}``), checked here."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.mail.email_checks import check_email
from bulksign.recipients.row_checks import COLUMN_LIMITS

RECIPIENT = "recipient"


@dataclass(frozen=True)
class PartyPerson:
    """Who signs as a role other than the recipient."""

    email: str
    name: str = ""
    phone: str | None = None


class PartyError(BulksignError):
    """A fixed party that cannot be used; ``message`` is for people."""


def fixed_parties(given: str | Mapping[str, Any] | None, *, roles: Sequence[str]) -> dict[str, PartyPerson]:
    """The batch's fixed parties by role, from JSON text or its parsed form; {} for nothing given. PartyError for
    a role the template does not have, the recipient (each row's own), or a missing or wrong address."""
    if given is None or given == "":
        return {}
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            given = None
    if not isinstance(given, Mapping):
        raise PartyError(N_('"parties" must be a JSON object of role → {"email": …, "name": …}.'))
    others = [r for r in roles if r != RECIPIENT]
    found: dict[str, PartyPerson] = {}
    for role, person in given.items():
        if role == RECIPIENT:
            raise PartyError(N_("The recipient is each row's own person: name only the other parties."))
        if role not in others:
            raise PartyError(
                N_(
                    "The template has no party %(role)s; it is signed by: %(roles)s.",
                    role=str(role)[:40],
                    roles=", ".join(others) or "—",
                )
            )
        if not isinstance(person, Mapping) or not isinstance(person.get("email"), str):
            raise PartyError(N_("Give the address of the party who signs as %(role)s.", role=role))
        email, problem = check_email(person["email"].strip())
        if problem or email is None:
            raise PartyError(N_("The party who signs as %(role)s: %(problem)s", role=role, problem=problem))
        name, phone = person.get("name") or "", person.get("phone") or None
        if not isinstance(name, str) or not isinstance(phone, str | None):
            raise PartyError(N_("The name and phone of the party who signs as %(role)s must be text.", role=role))
        found[role] = PartyPerson(
            email, name.strip()[: COLUMN_LIMITS["name"]], phone.strip()[: COLUMN_LIMITS["phone"]] if phone else None
        )
    return found
