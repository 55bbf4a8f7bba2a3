"""What a recipient does on the signing page in a real browser: agree, download the signed copy."""

from __future__ import annotations


def agree(page):
    consent = page.locator("input[name=consent]")
    consent.scroll_into_view_if_needed()
    consent.check()


def signed_bytes(page) -> bytes:
    with page.expect_download() as download:
        page.click("text=Download the signed copy (PDF)")
    return open(download.value.path(), "rb").read()
