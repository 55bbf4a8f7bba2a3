"""What a job reaches of its app as the objects themselves: the app behind ``current_app``, and ``db.session`` as the
scoped session it is (``core.extensions`` types it as the ``Session`` it stands for)."""

from __future__ import annotations

from typing import cast

from flask import Flask, current_app
from sqlalchemy.orm import Session, scoped_session

from bulksign.core.extensions import db


def this_app() -> Flask:
    """The current app itself, for work that outlives the app context's proxy."""
    return current_app._get_current_object()  # type: ignore[attr-defined]


def session_registry() -> scoped_session[Session]:
    """``db.session`` as a scoped session: ``()`` gives this thread's session, ``remove()`` closes it."""
    return cast("scoped_session[Session]", db.session)
