"""Template errors in plain words: ``TemplateError`` (the template cannot be used: line, hint, excerpt), the two
kinds refused at save whatever the row's values (``TemplateBroken``, ``TemplateTooCostly``), and Jinja's syntax
errors turned into them (``syntax_error``). A leaf: every template module raises these.
"""

from __future__ import annotations

from jinja2 import TemplateSyntaxError

from bulksign.doc_templates import template_words


class TemplateError(ValueError):
    """The template cannot be used; ``line`` is 1-based when known, ``hint`` says how to fix it, ``excerpt`` is the
    text of that line."""

    def __init__(self, message: str, line: int | None = None, *, hint: str | None = None, excerpt: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.hint = hint
        self.excerpt = excerpt

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else str(self.message)


def syntax_error(exc: TemplateSyntaxError, source: str) -> TemplateError:
    """Jinja's syntax error in plain words, with the line, its text and a hint."""
    lines = source.splitlines()
    line_text = lines[exc.lineno - 1] if exc.lineno and 0 < exc.lineno <= len(lines) else ""
    plain = template_words.explain(exc.message or "", line_text=line_text)
    return TemplateError(plain.message, exc.lineno, hint=plain.hint, excerpt=line_text.strip()[:300] or None)


class TemplateBroken(TemplateError):
    """The template fails in a way no row's values can avoid; refused when it is saved."""


class TemplateTooCostly(TemplateBroken):
    """Filling the template in takes too long or makes too much text, whatever the row's values."""
