"""Pictures people send (an attachment, a drawn signature), decoded within bounds known before decoding.
More in docs/architecture/documents.md."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from io import BytesIO

from PIL import Image

from bulksign.core.errors import BulksignError

#: Most memory the pictures decoded at once in one process may take together.
PROCESS_BUDGET_BYTES = 256 * 1024 * 1024
#: How long a picture waits for room in the budget before it is refused as busy.
BUDGET_WAIT_SECONDS = 10.0


class ImageProblem(Enum):
    UNREADABLE = "unreadable"
    TOO_LARGE = "too_large"
    BUSY = "busy"


class ImageRefused(BulksignError):
    """A picture that is not decoded; ``problem`` says why."""

    def __init__(self, problem: ImageProblem):
        super().__init__(problem.value)
        self.problem = problem


class _Budget:
    """Bytes of decoded pixels the process's threads may hold at once."""

    def __init__(self, total: int):
        self.total = total
        self.used = 0
        #: The most it held at once since it was made (or this was last reset).
        self.peak = 0
        self._changed = threading.Condition()

    @contextmanager
    def held(self, amount: int, *, wait: float) -> Iterator[None]:
        deadline = time.monotonic() + wait
        with self._changed:
            while self.used + amount > self.total:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ImageRefused(ImageProblem.BUSY)
                self._changed.wait(left)
            self.used += amount
            self.peak = max(self.peak, self.used)
        try:
            yield
        finally:
            with self._changed:
                self.used -= amount
                self._changed.notify_all()


BUDGET = _Budget(PROCESS_BUDGET_BYTES)


def pixel_bytes(mode: str) -> int:
    """The bytes Pillow keeps per pixel of ``mode``: one for 1/L/P, two for 16-bit grey, four for the rest (RGB is
    kept as four)."""
    if mode in ("1", "L", "P"):
        return 1
    return 2 if mode.startswith("I;16") else 4


def _coefficients(image) -> int:
    """What a progressive JPEG's coefficients take while it decodes: two bytes per component and pixel of the whole
    picture, whatever the scale it is decoded at (libjpeg keeps them all); none for any other picture."""
    if image.format != "JPEG" or not image.info.get("progressive"):
        return 0
    return image.width * image.height * len(image.getbands()) * 2


@contextmanager
def decoded(
    data: bytes, *, formats: tuple[str, ...], max_bytes: int, converted: bool = False, only_check: bool = False
) -> Iterator:
    """``data`` as a loaded Pillow image of one of ``formats`` (``PNG``, ``JPEG``), for the block's time: refused
    (``ImageRefused``) from its header when it takes more than ``max_bytes`` (``converted``: with the RGBA copy the
    caller makes of it), and held within the process's budget while decoded. ``only_check``: a JPEG is decoded at an
    eighth of its size, which still reads all of it."""

    try:
        image = Image.open(BytesIO(data), formats=formats)
    except Image.DecompressionBombError:  # Pillow's own limit, far above ours, met before ours is asked
        raise ImageRefused(ImageProblem.TOO_LARGE) from None
    except Exception:  # Pillow raises many kinds on a broken or hostile header; all mean the same
        raise ImageRefused(ImageProblem.UNREADABLE) from None
    with image:
        coefficients = _coefficients(image)
        if only_check and image.format == "JPEG":
            image.draft(image.mode, (math.ceil(image.width / 8), math.ceil(image.height / 8)))
        cost = image.width * image.height * (pixel_bytes(image.mode) + (4 if converted else 0)) + coefficients
        if cost > min(max_bytes, BUDGET.total):
            raise ImageRefused(ImageProblem.TOO_LARGE)
        with BUDGET.held(cost, wait=BUDGET_WAIT_SECONDS):
            try:
                image.load()
            except Exception:  # as above, for the pixels
                raise ImageRefused(ImageProblem.UNREADABLE) from None
            yield image


def check_image(data: bytes, *, formats: tuple[str, ...], max_bytes: int) -> None:
    """That ``data`` decodes as a picture of one of ``formats`` within ``max_bytes`` (``decoded``); else
    ImageRefused."""
    with decoded(data, formats=formats, max_bytes=max_bytes, only_check=True):
        pass
