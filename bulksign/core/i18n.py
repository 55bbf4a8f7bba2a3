"""Languages: staff choose theirs; recipients' pages and mails follow their batch's language."""

from __future__ import annotations

from flask import Flask, current_app, g, request
from flask_babel import get_locale
from flask_login import current_user

from bulksign.core.config import BASE_DIR
from bulksign.core.extensions import babel
from bulksign.core.localtime import batch_time


def select_locale() -> str:
    languages = current_app.config["LANGUAGES"]
    # Set by signing pages and mail jobs: the recipient's batch language wins.
    forced = g.get("locale") if g else None
    if forced in languages:
        return forced
    if current_user and getattr(current_user, "is_authenticated", False) and current_user.locale in languages:
        return current_user.locale
    if request:
        return request.accept_languages.best_match(languages) or current_app.config["BABEL_DEFAULT_LOCALE"]
    return current_app.config["BABEL_DEFAULT_LOCALE"]


def init_app(app: Flask) -> None:
    babel.init_app(
        app,
        locale_selector=select_locale,
        default_translation_directories=str(BASE_DIR / "bulksign" / "translations"),
    )

    app.jinja_env.globals["get_locale"] = get_locale
    # Recipients read times in their batch's time zone (and the page's language).
    app.jinja_env.filters["batch_time"] = lambda at, batch, with_time=True: batch_time(
        at, batch, locale=str(get_locale() or batch.language), with_time=with_time
    )
