"""Refresh the translation catalog in one step: extract, update, fill given Russian texts, compile.

    .venv/bin/python scripts/catalog.py                      # extract + update + compile
    .venv/bin/python scripts/catalog.py --ru texts.json      # ... and fill these translations

``texts.json`` maps an English msgid to its Russian text; a plural msgid maps to a list of the three Russian forms
(one, few, many), keyed by the singular msgid. Runs under a lock, so several people refreshing at once do not
overwrite each other's entries. Lists what is still untranslated.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
from pathlib import Path

from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "bulksign" / "translations"
PO = CATALOGS / "ru" / "LC_MESSAGES" / "messages.po"
PYBABEL = Path(sys.executable).parent / "pybabel"
#: Beyond Babel's defaults (gettext, ngettext, N_ ...): lazy texts, and messages whose words follow a count
#: (``N_plural(singular, plural, count)``), extracted as plural entries.
KEYWORDS = ["-k", "_l", "-k", "lazy_gettext", "-k", "N_plural:1,2"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ru", type=Path, help="JSON file of Russian texts by English msgid")
    args = parser.parse_args()
    texts = json.loads(args.ru.read_text(encoding="utf-8")) if args.ru else {}
    with open(CATALOGS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pot = CATALOGS / "messages.pot"
        run = {"cwd": ROOT, "check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run([PYBABEL, "-q", "extract", "-F", "babel.cfg", *KEYWORDS, "-o", pot, "."], **run)
        subprocess.run([PYBABEL, "-q", "update", "--no-fuzzy-matching", "-i", pot, "-d", CATALOGS, "-l", "ru"], **run)
        with PO.open("rb") as handle:
            catalog = read_po(handle)
        for message in catalog:
            if "fuzzy" in message.flags:  # a guess from a similar text ("Erase" as "Commands"): not a translation
                message.string = ("", "", "") if isinstance(message.id, tuple) else ""
                message.flags.discard("fuzzy")
            key = message.id[0] if isinstance(message.id, tuple) else message.id
            if key and key in texts:
                message.string = tuple(texts[key]) if isinstance(message.id, tuple) else texts[key]
                message.flags.discard("fuzzy")
        with PO.open("wb") as handle:
            write_po(handle, catalog, width=76, omit_header=False)
        subprocess.run([PYBABEL, "-q", "compile", "-d", CATALOGS], **run)
    missing = [
        message.id
        for message in catalog
        if message.id
        and (
            "fuzzy" in message.flags
            or not all(message.string if isinstance(message.string, tuple) else [message.string])
        )
    ]
    for msgid in missing:
        print("untranslated:", msgid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
