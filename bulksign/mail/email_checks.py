"""E-mail addresses: syntax checked once per domain, and the misspelt big mail domains with the domain meant."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from email_validator import EmailNotValidError, validate_email

from bulksign.core.messages import N_

_SIMPLE_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*\Z")


def _popular_typos() -> dict[str, str]:
    popular = (
        "gmail.com",
        "googlemail.com",
        "yahoo.com",
        "hotmail.com",
        "outlook.com",
        "icloud.com",
        "yandex.ru",
        "rambler.ru",
        "protonmail.com",
        "hotmail.co.uk",
        "yahoo.co.uk",
    )
    # Real domains a generated "typo" could hit; never flag them.
    real = {"mail.com", "mil.ru", "gmx.com", "yandex.com", "outlook.de", "hotmail.de", "live.com"}
    typos: dict[str, str] = {}
    for domain in popular:
        label, _, rest = domain.partition(".")
        variants = set()
        for i in range(len(label)):
            variants.add(label[:i] + label[i + 1 :])  # gmal
            variants.add(label[:i] + label[i] + label[i:])  # gmaail
            if i + 1 < len(label):
                variants.add(label[:i] + label[i + 1] + label[i] + label[i + 2 :])  # gmial
        for variant in variants - {label}:
            typos[f"{variant}.{rest}"] = domain
        for tld_typo in {
            "com": ("con", "cmo", "comm", "cpm", "vom", "xom", "om", "co", "c0m"),
            "ru": ("ry", "ri", "rj", "tu", "ur", "rus"),
        }.get(rest, ()):
            typos[f"{label}.{tld_typo}"] = domain
    typos.update(
        {
            "yahho.com": "yahoo.com",
            "gnail.com": "gmail.com",
            "gmaul.com": "gmail.com",
            "hotnail.com": "hotmail.com",
            "mail.ry": "mail.ru",
            "mail.ri": "mail.ru",
            "mail.rj": "mail.ru",
            "mail.tu": "mail.ru",
            "mial.ru": "mail.ru",
            "maill.ru": "mail.ru",
            "mali.ru": "mail.ru",
            "mail.r": "mail.ru",
            "yndex.ru": "yandex.ru",
            "yandeks.ru": "yandex.ru",
            "bk.ry": "bk.ru",
            "lits.ru": "list.ru",
            "inbox.ry": "inbox.ru",
        }
    )
    return {typo: right for typo, right in typos.items() if typo not in real and typo not in popular}


#: Misspelt big mail domains → the domain meant; an address there would bounce.
DOMAIN_TYPOS = _popular_typos()


@lru_cache(maxsize=4096)
def _checked_domain(domain: str) -> str:
    """The normalised domain, checked once per distinct domain by email-validator."""
    return validate_email(f"x@{domain}", check_deliverability=False).domain


def check_email(value: str, *, domain_choices: Mapping[str, str] | None = None) -> tuple[str | None, N_ | None]:
    """(normalised address, None) or (None, message); suggests the domain meant for an obvious typo.

    ``domain_choices`` are staff's answers to earlier suggestions: misspelt domain → the domain to use
    (the suggestion accepted, or the domain as written kept).
    """
    local, at, domain = value.rpartition("@")
    try:
        if at and len(value) <= 254 and len(local) <= 64 and _SIMPLE_LOCAL.match(local):
            address = f"{local}@{_checked_domain(domain)}"  # the common case: one full check per domain
        else:
            address = validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        return None, N_("Not a valid email address: %(reason)s", reason=str(exc))
    local, _, domain = address.rpartition("@")
    meant = DOMAIN_TYPOS.get(domain.lower())
    if meant:
        chosen = (domain_choices or {}).get(domain.lower())
        if chosen in (meant, domain.lower()):
            return f"{local}@{chosen}", None
        return None, N_("The domain looks misspelt: did you mean %(address)s?", address=f"{local}@{meant}")
    return address, None
