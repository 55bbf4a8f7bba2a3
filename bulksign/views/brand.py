"""The organisation's look for every page: ``/brand.css`` (its colours as CSS variables) and ``/brand/logo``.

A stylesheet rather than an inline ``<style>``: recipient pages forbid inline styles (strict CSP).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, abort, current_app, send_file

from bulksign.core.branding import Brand, brand_from, logo_src
from bulksign.core.config import LOGO_TYPES
from bulksign.people.auth import public

bp = Blueprint("brand", __name__)

#: Browsers may keep the brand for an hour; a changed setting shows after that (or a reload).
MAX_AGE = 3600


def current_brand() -> Brand:
    """The running app's brand (settings do not change while it runs)."""
    brand = current_app.extensions.get("bulksign_brand")
    if brand is None:
        brand = current_app.extensions["bulksign_brand"] = brand_from(current_app.config)
    return brand


def logo_origin() -> str | None:
    """The origin of a remote logo (recipient pages' CSP must allow it), else None."""
    brand = current_brand()
    if not brand.logo_is_url:
        return None
    parts = urlsplit(brand.logo)
    return f"{parts.scheme}://{parts.netloc}"


@bp.get("/brand.css")
@public
def stylesheet():
    brand = current_brand()
    css = (
        f":root {{ --brand:{brand.color}; --on-brand:{brand.on_color}; --brand-text:{brand.text_color}; "
        f"--brand-tint:{brand.tint}; }}\n"
    )
    response = Response(css, mimetype="text/css")
    response.cache_control.public = True
    response.cache_control.max_age = MAX_AGE
    return response


@bp.get("/brand/logo")
@public
def logo():
    brand = current_brand()
    if not brand.logo or brand.logo_is_url:
        abort(404)
    path = Path(brand.logo)
    response = send_file(path.resolve(), mimetype=LOGO_TYPES[path.suffix.lower()], max_age=MAX_AGE)
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


def init_app(app: Flask) -> None:
    @app.context_processor
    def _brand():
        brand = current_brand()
        return {"brand": brand, "brand_logo": logo_src(brand)}
