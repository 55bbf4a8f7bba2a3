"""Languages: staff choose theirs; recipients' pages and mails follow their batch's language."""

from __future__ import annotations

from flask import Flask, current_app, g, request, session
from flask_babel import get_locale
from flask_login import current_user

from bulksign.core.config import BASE_DIR
from bulksign.core.extensions import babel
from bulksign.core.localtime import batch_time

#: The language the last user logged in on this browser chose: the login page speaks it after they log out
#: (before anyone is logged in there is no account to ask; the browser's Accept-Language comes next).
LANGUAGE_COOKIE = "bulksign_language"
LANGUAGE_COOKIE_SECONDS = 365 * 24 * 3600


def _chosen_language() -> str | None:
    """The logged-in staff member's own choice, if any (None: they follow their browser)."""
    if current_user and getattr(current_user, "is_authenticated", False):
        return current_user.locale
    return None


def select_locale() -> str:
    languages = current_app.config["LANGUAGES"]
    # Set by signing pages and mail jobs: the recipient's batch language wins.
    forced = g.get("locale") if g else None
    if forced is not None and forced in languages:
        return forced
    chosen = _chosen_language()
    if chosen is not None and chosen in languages:
        return chosen
    if request:
        if request.cookies.get(LANGUAGE_COOKIE) in languages:
            return request.cookies[LANGUAGE_COOKIE]
        return request.accept_languages.best_match(languages) or current_app.config["BABEL_DEFAULT_LOCALE"]
    return current_app.config["BABEL_DEFAULT_LOCALE"]


def _remember_language(response):
    """Keep the browser's language cookie equal to the logged-in user's choice (session logins only: an API
    key's answers carry no cookie)."""
    chosen = _chosen_language() if session.get("_user_id") else None
    if chosen in current_app.config["LANGUAGES"] and request.cookies.get(LANGUAGE_COOKIE) != chosen:
        response.set_cookie(
            LANGUAGE_COOKIE,
            chosen,
            max_age=LANGUAGE_COOKIE_SECONDS,
            secure=current_app.config.get("SESSION_COOKIE_SECURE", False),
            httponly=True,
            samesite="Lax",
        )
    return response


def init_app(app: Flask) -> None:
    babel.init_app(
        app,
        locale_selector=select_locale,
        default_translation_directories=str(BASE_DIR / "bulksign" / "translations"),
    )

    app.jinja_env.globals["get_locale"] = get_locale
    app.after_request(_remember_language)
    # Recipients read times in their batch's time zone (and the page's language).
    app.jinja_env.filters["batch_time"] = lambda at, batch, with_time=True: batch_time(
        at, batch, locale=str(get_locale() or batch.language), with_time=with_time
    )
