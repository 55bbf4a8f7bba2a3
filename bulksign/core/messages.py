"""Messages the domain returns for people: a message id and its values, translated only when shown.
More in docs/architecture/core.md."""

from __future__ import annotations

from dataclasses import dataclass

from babel.lists import format_list
from flask_babel import get_locale, gettext, ngettext


class N_:
    """A translatable message with ``%(name)s`` values; compares and searches like its English text."""

    __slots__ = ("msgid", "values")

    def __init__(self, msgid: str, **values):
        self.msgid = msgid
        self.values = values

    def __str__(self) -> str:
        # Values are substituted into the translated text; gettext leaves escaping to the template.
        return gettext(self.msgid, **self.values)

    @property
    def english(self) -> str:
        # A value that is itself a message (a field's label) is taken in English too, not in the page's language.
        values = {k: v.english if isinstance(v, (N_, OneOf)) else v for k, v in self.values.items()}
        text = self._english_id()
        return text % values if values else text

    def _english_id(self) -> str:
        return self.msgid

    def __eq__(self, other) -> bool:
        if isinstance(other, N_):
            return (self.msgid, self.values) == (other.msgid, other.values)
        return self.english == other if isinstance(other, str) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.english)

    def __contains__(self, part: str) -> bool:
        return part in self.english or part in str(self)

    def __getattr__(self, name):
        # Read like text where code (or a test) treats it as one: startswith, lower, splitlines ...
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.english, name)

    def __repr__(self) -> str:
        return f"N_({self.english!r})"


class N_plural(N_):
    """A message whose words follow a count: ``N_plural("%(num)s row", "%(num)s rows", count, **values)``; the reader's
    language picks its form when it is shown."""

    __slots__ = ("plural", "count")

    def __init__(self, singular: str, plural: str, count: int, **values):
        # ``num`` may come back among stored values (a skipped row's reason): the count given wins.
        super().__init__(singular, **{**values, "num": count})
        self.plural = plural
        self.count = count

    def __str__(self) -> str:
        # ``num`` (the count) is among the values.
        return ngettext(self.msgid, self.plural, **self.values)

    def _english_id(self) -> str:
        return self.msgid if self.count == 1 else self.plural

    def __repr__(self) -> str:
        return f"N_plural({self.english!r})"


@dataclass(frozen=True)
class OneOf:
    """Alternatives as a value of an N_, joined as the reader's language lists them: "800 or 1600", "800 или 1600"
    (Babel's CLDR list patterns; an " or " written here would stay English in every language)."""

    items: tuple[str, ...]

    def __str__(self) -> str:
        return self._joined(get_locale() or "en")

    @property
    def english(self) -> str:
        return self._joined("en")

    def _joined(self, locale) -> str:
        return format_list(list(self.items), style="or", locale=locale)
