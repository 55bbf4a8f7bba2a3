"""Browser-test helpers: logging in, screenshots at a desktop and a phone width, and axe-core's accessibility check."""

from __future__ import annotations

import os
import re
from pathlib import Path

from bulksign.core.config import BASE_DIR

#: Where the screenshots go (a reviewer opens them; CI keeps the folder as test output).
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", BASE_DIR / "test-artifacts"))
WIDTHS = (1366, 360)
#: axe-core, vendored (static/vendor/README.md); loaded from our own origin so strict CSP pages accept it.
AXE = "/static/vendor/axe-4.14.1.min.js"
#: A batch's own page (``/batches/new`` is not one: waiting for ``/batches/*`` there returns at once).
BATCH_PAGE = re.compile(r"/batches/\d+$")
#: What fails a page: WCAG A/AA problems (contrast, names, keyboard) that block or seriously hinder someone.
BLOCKING = {"serious", "critical"}

RUN_AXE = """async () => {
  const result = await axe.run(document, {iframes: false, resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + (n.failureSummary || '').replace(/\\n/g, ' '))}));
}"""


def log_in(page, base_url: str, email: str, password: str) -> None:
    """Through the login form, as a person would; returns on the home page."""
    page.goto(f"{base_url}/auth/login")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def save_html_template(page, base_url: str, *, name: str, html: str) -> None:
    """Through the new-template form, as a person would; returns on the saved template's page."""
    page.goto(f"{base_url}/templates/new")
    page.fill("input[name=name]", name)
    page.fill("textarea[name=html]", html)
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/templates/\d+"))
    # Its scripts have run: the party editor, where the page has one, is ready for typing.
    page.wait_for_load_state("load")


def axe_violations(page, base_url: str) -> list[dict]:
    """The serious and critical axe-core violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(url=base_url + AXE)
    return [v for v in page.evaluate(RUN_AXE) if v["impact"] in BLOCKING]


def look_at(page, base_url: str, name: str, *, widths=WIDTHS, height: int = 900) -> dict[int, list[dict]]:
    """Screenshot the page at each width into ``ARTIFACTS/<name>-<width>.png`` and run axe at each; returns
    width → blocking violations."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    found = {}
    for width in widths:
        page.set_viewport_size({"width": width, "height": height})
        # The resize applied and laid out: the new width seen, then two frames drawn.
        page.wait_for_function("width => window.innerWidth === width", arg=width)
        page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
        found[width] = axe_violations(page, base_url)
        # A phone-width page must not scroll sideways: wide content scrolls inside its own box.
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 1:
            found[width].append(
                {"id": "page-scrolls-sideways", "impact": "serious", "help": f"{overflow}px too wide", "nodes": []}
            )
    return found


def shoot(page, name: str) -> None:
    """Screenshots of the page at 1366 and 360 px into test-artifacts/, for a reviewer to look at."""

    folder = ARTIFACTS
    folder.mkdir(exist_ok=True)
    for width in (1366, 360):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
