"""Template syntax errors in plain words: what is wrong, and a hint how to fix it, instead of Jinja's parser message.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import re
from dataclasses import dataclass

from flask_babel import lazy_gettext as _l


@dataclass(frozen=True)
class PlainError:
    message: object
    hint: object | None


_GOT_WORD = re.compile(r"expected token 'end of print statement', got '([^']*)'")
_STATEMENT_GOT = re.compile(r"expected token 'end of statement block', got '([^']*)'")
_UNCLOSED_BLOCK = re.compile(r"The innermost block that needs to be closed is '(\w+)'")
_UNKNOWN_TAG = re.compile(r"Encountered unknown tag '(\w+)'")
_UNEXPECTED_CHAR = re.compile(r"unexpected char '(.)'")
_SPACED_NAME = re.compile(r"\{\{-?\s*([^{}]*?)\s*-?\}\}")
#: What closes each block tag.
_CLOSERS = {
    "if": "endif",
    "for": "endfor",
    "macro": "endmacro",
    "set": "endset",
    "with": "endwith",
    "filter": "endfilter",
    "raw": "endraw",
    "call": "endcall",
    "block": "endblock",
}


def _placeholder_with(word: str, line: str) -> str | None:
    """The ``{{ … }}`` on ``line`` that contains ``word`` after another word, as written."""
    for match in _SPACED_NAME.finditer(line):
        if re.search(rf"\w\s+{re.escape(word)}\b", match.group(1)):
            return match.group(1)
    return None


def explain(message: str, *, line_text: str) -> PlainError:
    """Jinja's syntax-error ``message`` about ``line_text`` (the source line it names) in plain words, with a hint."""
    message = message or ""
    if found := _GOT_WORD.search(message):
        inside = _placeholder_with(found.group(1), line_text)
        if inside and re.fullmatch(r"[\w\s]+", inside):
            return PlainError(
                _l("A placeholder has a space in it: {{ %(inside)s }}.", inside=inside),
                _l(
                    "Placeholder names are one word: write {{ %(joined)s }}, and name the file's column the same way.",
                    joined="_".join(inside.split()),
                ),
            )
        return PlainError(
            _l("A placeholder holds something that is not a name or an expression: “%(word)s”.", word=found.group(1)),
            _l("Write one name between the braces, like {{ first_name }}; put other text outside them."),
        )
    if "unexpected end of template" in message.lower() and "print statement" in message:
        return PlainError(
            _l("A placeholder is opened with {{ but never closed."),
            _l("Close it with }} on the same line, like {{ name }}."),
        )
    if found := _UNCLOSED_BLOCK.search(message):
        tag = found.group(1)
        closer = _CLOSERS.get(tag, "end" + tag)
        if unknown := _UNKNOWN_TAG.search(message):
            return PlainError(
                _l(
                    "{%% %(tag)s %%} is closed in the wrong place: {%% %(unknown)s %%} comes before {%% %(closer)s %%}.",
                    tag=tag,
                    unknown=unknown.group(1),
                    closer=closer,
                ),
                _l(
                    "Close the innermost block first: each {%% %(tag)s %%} needs its {%% %(closer)s %%} before an outer "
                    "block ends.",
                    tag=tag,
                    closer=closer,
                ),
            )
        return PlainError(
            _l("{%% %(tag)s %%} is opened but never closed.", tag=tag),
            _l("Add {%% %(closer)s %%} where the part that depends on it ends.", closer=closer),
        )
    if found := _UNKNOWN_TAG.search(message):
        tag = found.group(1)
        if tag.startswith("end"):
            return PlainError(
                _l("{%% %(tag)s %%} closes a block that was never opened.", tag=tag),
                _l("Remove it, or add the {%% %(opener)s … %%} it belongs to above it.", opener=tag[3:]),
            )
        return PlainError(
            _l("{%% %(tag)s %%} is not an instruction templates know.", tag=tag),
            _l(
                "To show a value write {{ %(tag)s }}; instructions are {%% if … %%}, {%% for … in … %%} and "
                "their {%% endif %%}, {%% endfor %%}.",
                tag=tag,
            ),
        )
    if "unexpected '}'" in message:
        return PlainError(
            _l("A closing brace has no opening one: a placeholder is missing its {{."),
            _l("Write placeholders with two braces on each side, like {{ name }}."),
        )
    if found := _UNEXPECTED_CHAR.search(message):
        return PlainError(
            _l("The character “%(char)s” cannot be used inside {{ }} or {%% %%}.", char=found.group(1)),
            _l("Names use letters, digits and underscores; write other text outside the braces."),
        )
    if "tag name expected" in message or "expected token 'name'" in message:
        return PlainError(
            _l("A {% %} has no instruction in it."),
            _l("Write an instruction such as {% if paid %} or remove the braces."),
        )
    return PlainError(
        _l("The {{ }} or {%% %%} markup on this line cannot be read (%(detail)s).", detail=message),
        _l("Check that every {{ has its }}, every {%% has its %%}, and every block is closed."),
    )
