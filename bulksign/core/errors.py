"""The one base of the errors the app's own operations raise for people to read.
More in docs/architecture/core.md."""

from __future__ import annotations

from typing import TypeAlias

from flask_babel import LazyString

from bulksign.core.messages import N_

#: What a message may be: a translatable message (``N_`` or a lazy gettext), or text already in the reader's words
#: (a server's answer).
Message: TypeAlias = N_ | LazyString | str


class BulksignError(ValueError):
    """A refusal in people's words. ``status``: the HTTP status a view answers with (the class's default unless
    given); ``field``: the form field it is about, when there is one."""

    status: int = 400

    def __init__(self, message: Message, *, field: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return str(self.message)
