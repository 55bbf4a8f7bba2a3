"""Phone numbers of a recipients file, checked and written in E.164 (``+79991234567``) with ``phonenumbers``: a
number written nationally (``8 999 123 45 67``) is read in the batch's region, one with ``+`` in any region."""

from __future__ import annotations

import phonenumbers

from bulksign.core.messages import N_

#: The region a national number is read in when no setting names one: by the batch's language.
REGION_OF_LANGUAGE = {"ru": "RU", "en": "GB"}
#: Longer than any number the plan allows (15 digits) with room for spaces, brackets and dashes.
MAX_WRITTEN = 40


def region_for(*, language: str, setting: str) -> str:
    """The region national numbers are read in: the ``PHONE_REGION`` setting, else the batch's language's."""
    return (setting or REGION_OF_LANGUAGE.get(language, "GB")).upper()


def e164(written: str, *, region: str) -> tuple[str | None, N_ | None]:
    """``written`` as E.164, or None and why it is not a number a text can go to (a mobile or fixed line)."""
    value = written.strip()
    if len(value) > MAX_WRITTEN:
        return None, N_("The phone number is too long: %(n)s characters.", n=len(value))
    if any(c.isalpha() for c in value):
        return None, N_("The phone number may hold digits, spaces, brackets, dashes and a leading + only.")
    try:
        number = phonenumbers.parse(value, region)
    except phonenumbers.NumberParseException:
        return None, N_("This is not a phone number: %(value)s.", value=value)
    if not phonenumbers.is_valid_number(number):
        return None, N_(
            "%(value)s is not a valid phone number (read in %(region)s; write it with +country code if it is "
            "from elsewhere).",
            value=value,
            region=region,
        )
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164), None
