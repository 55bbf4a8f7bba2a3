"""Browser-test steps on the template page (its editor, its party editor), as a clerk takes them."""

from __future__ import annotations


def name_party(party, *, labels: tuple[str, str], key: str | None = None, person: tuple[str, str] | None = None):
    """Fill one party's row (``party``: its ``.party-def`` locator): its key when it is new, its English and Russian
    labels, and, for one fixed person who signs every batch, their name and address."""
    if key is not None:
        party.locator("[name=party-key]").fill(key)
    party.locator("[name=party-label-en]").fill(labels[0])
    party.locator("[name=party-label-ru]").fill(labels[1])
    if person is not None:
        party.locator("[name=party-source]").select_option("fixed")
        party.locator("[name=party-name]").fill(person[0])
        party.locator("[name=party-email]").fill(person[1])


def open_editor(page) -> None:
    """Go from a template's page to its editor ("Edit") and wait for the page's load: the editor's tabs work once
    its deferred script has run, and a tab clicked before that does nothing."""
    with page.expect_navigation():
        page.click("text=Edit")
