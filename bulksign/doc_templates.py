"""Document templates: immutable versions, variables extracted at save, rendered in Jinja's sandbox."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from jinja2 import TemplateSyntaxError, meta
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from sqlalchemy.orm import Session

from .logs import log
from .models import DocumentTemplate, TemplateVersion, User

logger = logging.getLogger(__name__)

#: Variables every request has whatever the file's columns; not required as columns.
BUILTIN_VARIABLES = frozenset({"email", "name", "phone"})

DEFAULT_EMAIL_SUBJECT = "Please sign: {{ document_name }}"
DEFAULT_EMAIL_BODY = (
    "Hello {{ name }},\n\n{{ sender }} asks you to sign \"{{ document_name }}\".\n"
    "Open the document and sign it here:\n{{ signing_link }}\n\n"
    "The link is personal: please do not forward it. It is valid until {{ deadline }}.\n"
)
DEFAULT_REMINDER_SUBJECT = "Reminder: \"{{ document_name }}\" is waiting for your signature"
DEFAULT_REMINDER_BODY = (
    "Hello {{ name }},\n\nA friendly reminder: \"{{ document_name }}\" from {{ sender }} is still "
    "waiting for your signature.\nIt takes a minute:\n{{ signing_link }}\n\n"
    "The link stays valid until {{ deadline }}.\n"
)

#: One sandboxed environment for every render: autoescape on, no access to Python internals.
sandbox = ImmutableSandboxedEnvironment(autoescape=True)
#: For plain-text mail bodies and subjects: still sandboxed, but HTML escaping would garble text.
text_sandbox = ImmutableSandboxedEnvironment(autoescape=False)


class TemplateError(ValueError):
    """The template cannot be used; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def extract_variables(source: str) -> list[str]:
    """The placeholders a template uses, sorted; raises TemplateError with the line on a syntax error."""
    try:
        ast = sandbox.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(exc.message or "syntax error", exc.lineno) from None
    return sorted(meta.find_undeclared_variables(ast))


@dataclass(frozen=True)
class SavedVersion:
    template: DocumentTemplate
    version: TemplateVersion


def create_template(session: Session, *, name: str, html: str, user: User | None, now: datetime,
                    email_subject: str = DEFAULT_EMAIL_SUBJECT, email_body: str = DEFAULT_EMAIL_BODY,
                    reminder_subject: str = DEFAULT_REMINDER_SUBJECT,
                    reminder_body: str = DEFAULT_REMINDER_BODY) -> SavedVersion:
    """A new template with its first version."""
    name = name.strip()
    if not name:
        raise TemplateError("Give the template a name.")
    template = DocumentTemplate(name=name[:200], created_by_id=user.id if user else None, created_at=now)
    session.add(template)
    session.flush()
    return save_version(session, template=template, html=html, user=user, now=now,
                        email_subject=email_subject, email_body=email_body,
                        reminder_subject=reminder_subject, reminder_body=reminder_body)


def save_version(session: Session, *, template: DocumentTemplate, html: str, user: User | None, now: datetime,
                 email_subject: str, email_body: str, reminder_subject: str, reminder_body: str) -> SavedVersion:
    """Insert the next immutable version of ``template``."""
    if not html.strip():
        raise TemplateError("The template is empty.")
    variables = extract_variables(html)
    for label, text in (("email subject", email_subject), ("email body", email_body),
                        ("reminder subject", reminder_subject), ("reminder body", reminder_body)):
        try:
            extract_variables(text)
        except TemplateError as exc:
            raise TemplateError(f"{label}: {exc.message}", exc.line) from None
    template.latest_version += 1
    version = TemplateVersion(
        template_id=template.id, version=template.latest_version, html=html, variables=variables,
        email_subject=email_subject, email_body=email_body, reminder_subject=reminder_subject,
        reminder_body=reminder_body, created_by_id=user.id if user else None, created_at=now,
    )
    session.add(version)
    session.flush()
    log(logger, logging.INFO, "template version saved", template_id=template.id, version=version.version)
    return SavedVersion(template=template, version=version)


def render_html(source: str, context: dict) -> str:
    """Render a document template to HTML: every value is escaped, nothing outside ``context`` is reachable."""
    try:
        return sandbox.from_string(source).render(context)
    except TemplateSyntaxError as exc:
        raise TemplateError(exc.message or "syntax error", exc.lineno) from None
    except SecurityError as exc:
        raise TemplateError(f"The template tried something that is not allowed: {exc}") from None


def render_text(source: str, context: dict) -> str:
    """Render a mail subject or plain-text body."""
    try:
        return text_sandbox.from_string(source).render(context)
    except TemplateSyntaxError as exc:
        raise TemplateError(exc.message or "syntax error", exc.lineno) from None
    except SecurityError as exc:
        raise TemplateError(f"The template tried something that is not allowed: {exc}") from None
