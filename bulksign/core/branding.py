"""The organisation's name, logo and colour (``ORG_NAME``, ``ORG_LOGO``, ``ORG_COLOR``) as pages and mails use them.
More in docs/architecture/core.md."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bulksign.core.errors import BulksignError

HEX_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
DEFAULT_COLOR = "#2357d9"
DEFAULT_NAME = "Bulksign"
#: The bundled logo (a static file), used when ``ORG_LOGO`` is not set.
DEFAULT_LOGO = "logo.svg"
INK = "#111827"
WHITE = "#ffffff"
#: WCAG 2 AA for normal text.
AA = 4.5


class BrandError(BulksignError):
    """A branding setting is malformed; the message names it."""


@dataclass(frozen=True)
class Brand:
    name: str
    #: ``ORG_LOGO`` as given: an http(s) URL, or a path to an image file on this host; "" for the bundled logo.
    logo: str
    #: The organisation's colour, normalised to ``#rrggbb``.
    color: str
    #: Text on a ``color`` background: white or ink, whichever contrasts more.
    on_color: str
    #: ``color`` darkened until it reads on white at 4.5:1 (links, headings, outlines).
    text_color: str
    #: A very light tint of ``color`` for backgrounds (selected rows, the mail's header band).
    tint: str

    @property
    def logo_is_url(self) -> bool:
        return self.logo.startswith(("http://", "https://"))


def normalise_color(value: str) -> str:
    """``#abc`` or ``#aabbcc`` (any case) as ``#aabbcc``; raises BrandError otherwise."""
    value = value.strip()
    if not HEX_COLOR.match(value):
        raise BrandError(f"ORG_COLOR must be a hex colour like #2357d9, got {value!r}")
    digits = value[1:]
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    return "#" + digits.lower()


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{max(0, min(255, round(c))):02x}" for c in rgb)


def luminance(color: str) -> float:
    """Relative luminance (WCAG 2) of a ``#rrggbb`` colour."""

    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in _rgb(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """The WCAG contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _mix(color: str, other: str, share: float) -> str:
    """``color`` with ``share`` (0–1) of ``other`` mixed in."""
    r, g, b = (c + (o - c) * share for c, o in zip(_rgb(color), _rgb(other)))
    return _hex((r, g, b))


def palette(color: str) -> tuple[str, str, str]:
    """(on_color, text_color, tint) for a normalised brand colour."""
    on_color = WHITE if contrast(color, WHITE) >= contrast(color, INK) else INK
    text_color = color
    share = 0.0
    while contrast(text_color, WHITE) < AA and share < 1:
        share += 0.05
        text_color = _mix(color, "#000000", share)
    return on_color, text_color, _mix(color, WHITE, 0.92)


def logo_src(brand: Brand, *, base: str = "") -> str:
    """Where the logo is loaded from: the configured URL, else our route for the configured file, else the bundled
    file; ``base`` is "" on pages and ``APP_URL`` in mails."""
    if brand.logo_is_url:
        return brand.logo
    return base + ("/brand/logo" if brand.logo else f"/static/{DEFAULT_LOGO}")


def brand_from(config: dict) -> Brand:
    """The brand an app's settings describe (``load_config`` has checked them)."""
    color = normalise_color(config.get("ORG_COLOR") or DEFAULT_COLOR)
    on_color, text_color, tint = palette(color)
    return Brand(
        name=(config.get("ORG_NAME") or DEFAULT_NAME).strip()[:100],
        logo=(config.get("ORG_LOGO") or "").strip(),
        color=color,
        on_color=on_color,
        text_color=text_color,
        tint=tint,
    )
