"""The PDF-form pipeline (fill + flatten + store, per recipient) against the bare wkhtmltopdf loop, same run.

The document is the pipeline bench's 2-page employment contract: printed once by wkhtmltopdf with its
placeholders empty, then given one box per variable (the path a PDF without form fields takes; form fields
take the same one). Each recipient's copy is filled, flattened, hashed and written to a storage folder, as
the render job does, by PDF_CONCURRENCY processes, each having prepared the template once (as a render
worker does on its first document). The baseline renders the same contract with each row's values through
wkhtmltopdf with the same options and concurrency, half before and half after. Target: 20×.
"""

from __future__ import annotations

import hashlib
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

from bench import Figure

TARGET_RATIO = 20.0
ROW = {
    "name": "Анна Петрова-Иванова",
    "email": "anna@example.com",
    "contract_number": "C-{i}",
    "city": "Rīga",
    "position": "Инженер-конструктор",
    "salary": "4 200 €",
    "start_date": "2027-01-01",
}
#: Where each value goes on page 1 of the contract (points from the bottom-left corner): name, e-mail …
BOXES = [
    {"name": name, "page": 0, "x": 60 + 250 * (i % 2), "y": 160 + 26 * (i // 2), "w": 230, "h": 20, "font_size": 11}
    for i, name in enumerate(ROW)
]

_source: bytes = b""


def _row(i: int) -> dict:
    return {k: v.format(i=i) for k, v in ROW.items()}


def _warm(source: bytes) -> None:
    """Each process prepares the template once before the clock starts, as a render worker on its first document."""
    global _source
    from bulksign.doc_templates import pdf_fill

    _source = source
    pdf_fill.fill(source, _row(0), placed=_placed())


def _placed():
    from bulksign.doc_templates import pdf_forms

    return pdf_forms.check_boxes(pdf_forms.read_form(_source), BOXES)


def _fill_chunk(args: tuple[list[int], str]) -> int:
    """What the render job does per recipient, minus the database: fill, hash, store."""
    from bulksign.doc_templates import pdf_fill
    from bulksign.documents.storage import LocalStorage

    numbers, folder = args
    storage, placed = LocalStorage(folder), _placed()
    for i in numbers:
        data = pdf_fill.fill(_source, _row(i), placed=placed)
        hashlib.sha256(data).hexdigest()
        storage.put(f"batches/1/requests/{i}/original.pdf", data)
    return len(numbers)


def _forms_rate(source: bytes, n: int, concurrency: int, folder: str) -> float:
    chunk = 50
    with ProcessPoolExecutor(concurrency, initializer=_warm, initargs=(source,)) as pool:
        list(pool.map(_fill_chunk, [([], folder)] * concurrency * 2))  # every process started and warm
        started = time.monotonic()
        done = sum(pool.map(_fill_chunk, [(list(range(s, min(s + chunk, n))), folder) for s in range(0, n, chunk)]))
        return done / (time.monotonic() - started)


def run(*, small: bool) -> list[Figure]:
    from bench.bench_pipeline import _bare_loop, _contract
    from bulksign.core.config import load_config
    from bulksign.doc_templates import pdf_fill, pdf_forms
    from bulksign.doc_templates.jinja_sandbox import render_html
    from bulksign.documents.pdf import render_pdf

    concurrency = int(load_config({}).get("PDF_CONCURRENCY") or os.cpu_count() or 1)
    n = 300 if small else int(os.environ.get("BENCH_PDF_FORMS_RECIPIENTS", "10000"))
    bare_n = (10 if small else 200) // 2
    contract = _contract()
    source = render_pdf(render_html(contract, {}))  # the same contract, placeholders empty
    html = render_html(contract, _row(1))
    with tempfile.TemporaryDirectory(prefix="bulksign-bench-forms-") as folder:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        bare_before = _bare_loop(html, bare_n, concurrency)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        bare_cpu = (after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime) / bare_n
        rate = _forms_rate(source, n, concurrency, folder)
        bare_after = _bare_loop(html, bare_n, concurrency)
        placed = pdf_forms.check_boxes(pdf_forms.read_form(source), BOXES)
        sample = pdf_fill.fill(source, _row(7), placed=placed)
        count = 50 if small else 500
        started = time.process_time()
        for i in range(count):
            pdf_fill.fill(source, _row(i), placed=placed)
        one = (time.process_time() - started) / count
    bare = 2 / (1 / bare_before + 1 / bare_after)
    ratio = rate / bare
    label = f"{n:,} recipients" + (" (small)" if small else "")
    return [
        Figure(
            f"PDF-form pipeline docs/s (fill, flatten, hash, store), {label}, {concurrency} processes",
            rate,
            "docs/s",
            f"≥ {TARGET_RATIO:g} × bare",
            ratio >= TARGET_RATIO,
            ratio,
            f"bare wkhtmltopdf {bare:.1f} docs/s ({bare_n} before: {bare_before:.1f}, {bare_n} after: {bare_after:.1f})",
        ),
        # CPU per document: what a busy machine barely moves (docs/s above depend on what else runs).
        Figure(
            "CPU per filled document (fill, flatten)",
            one * 1000,
            "ms",
            ratio=bare_cpu / one,
            baseline=f"wkhtmltopdf's CPU per document {bare_cpu * 1000:.1f} ms (÷ this)",
        ),
        Figure("filled document size (2-page contract, DejaVu Sans embedded)", len(sample) / 1024, "KiB"),
    ]


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)
