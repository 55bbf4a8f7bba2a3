"""Drawn signatures as a signing page sends them: a PNG of a pen stroke, and its data: URL."""

from __future__ import annotations

import base64
import io

from PIL import Image


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def png(width=300, height=100) -> bytes:
    image = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    for x in range(20, 280):
        image.putpixel((x, 50 + (x % 17)), (20, 30, 40, 255))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()
