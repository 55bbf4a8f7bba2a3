"""The mail texts each template version carries (invitation and reminder, subject and body): the defaults, kept as
message ids, and ``mail_text``, which gives a batch's recipients a default text in their language.
"""

from __future__ import annotations

from typing import cast

from flask_babel import force_locale, gettext

from bulksign.core.messages import N_

# The default mail texts are message ids: a template that keeps one mails it in its batch's language
# (``mail_text``). Outside a request N_ renders the English id, which is what a new version stores.
DEFAULT_EMAIL_SUBJECT = N_("Please sign: {{ document_name }}").msgid
# They greet by name only a row that has one: a file of addresses alone goes out with the default texts.
DEFAULT_EMAIL_BODY = N_(
    'Hello{% if name %} {{ name }}{% endif %},\n\n{{ sender }} asks you to sign "{{ document_name }}".\n'
    "Open the document and sign it here:\n{{ signing_link }}\n\n"
    "The link is personal: please do not forward it. It is valid until {{ deadline }}.\n"
).msgid
DEFAULT_REMINDER_SUBJECT = N_('Reminder: "{{ document_name }}" is waiting for your signature').msgid
DEFAULT_REMINDER_BODY = N_(
    'Hello{% if name %} {{ name }}{% endif %},\n\nA friendly reminder: "{{ document_name }}" from {{ sender }} is still '
    "waiting for your signature.\nIt takes a minute:\n{{ signing_link }}\n\n"
    "The link stays valid until {{ deadline }}.\n"
).msgid
#: What a mail text may use besides the row's columns (``signing.invitations.mail_context`` fills them in).
MAIL_VARIABLES = frozenset({"email", "sender", "document_name", "signing_link", "deadline"})
#: The mail texts each version carries (a new version made from an old one keeps them).
MAIL_FIELDS = ("email_subject", "email_body", "reminder_subject", "reminder_body")
_DEFAULT_MAIL_TEXTS = frozenset(
    {DEFAULT_EMAIL_SUBJECT, DEFAULT_EMAIL_BODY, DEFAULT_REMINDER_SUBJECT, DEFAULT_REMINDER_BODY}
)
#: How the default bodies greeted before they greeted by name only a row with one.
_FORMER_GREETING, _GREETING = "Hello {{ name }},", "Hello{% if name %} {{ name }}{% endif %},"
#: Default texts of earlier releases → today's: a version that kept one keeps the default (its language, and a
#: greeting that needs no name), not an English text that prints ``{{ name }}`` on every row.
_FORMER_DEFAULTS = {
    body.replace(_GREETING, _FORMER_GREETING, 1): body for body in (DEFAULT_EMAIL_BODY, DEFAULT_REMINDER_BODY)
}


def with_newlines(*, text: str) -> str:
    """``text`` with every line ending as ``\\n``: browsers send a textarea's lines ending in ``\\r\\n``, and a default
    text kept on the web form would otherwise no longer be its message id (and be mailed in English)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def current_text(*, text: str) -> str:
    """``text`` with ``\\n`` line endings, and today's default for a default text of an earlier release."""
    text = with_newlines(text=text)
    return _FORMER_DEFAULTS.get(text, text)


def mail_text(source: str, *, language: str) -> str:
    """A mail template as the batch's recipients read it: a default text in their language, staff's own as written.

    Either with ``\\n`` line endings: versions saved before ``save_version`` normalised them may hold a default
    text with ``\\r\\n``, and the HTML part finds paragraphs by ``\\n\\n``."""
    text = current_text(text=source)
    if text not in _DEFAULT_MAIL_TEXTS:
        return text

    with force_locale(language):
        return cast(str, gettext(text))
