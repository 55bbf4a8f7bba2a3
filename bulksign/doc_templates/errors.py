"""Template errors in plain words: ``TemplateError`` (line, hint, excerpt), the kinds refused at save whatever
the row's values (``TemplateBroken``, ``TemplateTooCostly``), and Jinja's syntax errors turned into them."""

from __future__ import annotations

from jinja2 import TemplateSyntaxError

from bulksign.core.errors import BulksignError, Message
from bulksign.doc_templates import template_words


class TemplateError(BulksignError):
    """The template cannot be used; ``line`` is 1-based when known, ``hint`` says how to fix it, ``excerpt`` is the
    text of that line."""

    def __init__(
        self,
        message: Message,
        line: int | None = None,
        *,
        hint: Message | None = None,
        excerpt: str | None = None,
        field: str | None = None,
    ):
        super().__init__(message, field=field)
        self.line = line
        self.hint = hint
        self.excerpt = excerpt

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else str(self.message)


class FieldSettingsError(TemplateError):
    """Settings staff sent that no field could have (a condition among them); ``field`` names the field (None: the
    whole list)."""

    def __init__(self, message: Message, *, field: str | None = None):
        super().__init__(message, field=field)


def line_text(source: str, *, line: int | None) -> str:
    """The text of ``source``'s 1-based ``line``, or "" when there is no such line."""
    lines = source.splitlines()
    return lines[line - 1] if line and 0 < line <= len(lines) else ""


def excerpt(source: str, *, line: int | None) -> str | None:
    """What a refusal shows of ``source``'s ``line``: its text, trimmed (a data: image makes one line megabytes)."""
    return line_text(source, line=line).strip()[:300] or None


def syntax_error(exc: TemplateSyntaxError, source: str) -> TemplateError:
    """Jinja's syntax error in plain words, with the line, its text and a hint."""
    plain = template_words.explain(exc.message or "", line_text=line_text(source, line=exc.lineno))
    return TemplateError(plain.message, exc.lineno, hint=plain.hint, excerpt=excerpt(source, line=exc.lineno))


class TemplateBroken(TemplateError):
    """The template fails in a way no row's values can avoid; refused when it is saved."""


class TemplateTooCostly(TemplateBroken):
    """Filling the template in takes too long or makes too much text, whatever the row's values."""
