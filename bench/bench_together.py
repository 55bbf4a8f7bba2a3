"""What checking every part of a run costs, per document, against what printing it costs.

In this process, for the pipeline bench's contract (with and without a doctype) in runs of ``RENDER_CHUNK_SIZE``:
the CPU of reading each filled document once (``together.Filled.of``: where its body starts, whether it closes
what it opens, what it may show), of splitting the run (fonts cut, what each part shows read on the way), and of
checking every part (``part_check``), each against the CPU wkhtmltopdf spends on the same run, per document. Best
of several rounds, ``process_time`` (a busy machine moves it less than wall time).
"""

from __future__ import annotations

import os
import resource
import time

from bench import Figure
from bench.bench_pipeline import TEMPLATES

ROUNDS = 5


def _best(step, rounds: int = ROUNDS) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        step()
        best = min(best, time.process_time() - started)
    return best


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(*, small: bool) -> list[Figure]:
    from bulksign.core.config import load_config
    from bulksign.doc_templates.jinja_sandbox import render_html
    from bulksign.documents import html_frame, part_check, together
    from bulksign.documents.pdf import render_pdf
    from bulksign.documents.signature_box import html_mark

    size = 10 if small else int(load_config({"SECRET_KEY": "bench"})["RENDER_CHUNK_SIZE"])
    rounds = 2 if small else ROUNDS
    figures = []
    for kind, template in TEMPLATES.values():
        source = template()
        filled = [
            render_html(
                source,
                {
                    "name": f"Recipient {i}",
                    "email": f"r{i}@example.com",
                    "contract_number": f"C-{i}",
                    "city": "Riga",
                    "position": "Engineer",
                    "salary": str(4200 + i),
                    "start_date": "2027-01-01",
                    "signature": html_mark(),
                },
            )
            for i in range(size)
        ]
        read = _best(lambda filled=filled: [together.Filled.of(text) for text in filled], rounds)
        documents = [together.Filled.of(text) for text in filled]
        html = html_frame.framed(documents[0].document.head, [d.document.body for d in documents])
        # Outside the sandbox here: its outer process exits without reaping wkhtmltopdf, whose CPU would then
        # reach no parent's account (bench_pipeline reaps them itself).
        sandboxed = os.environ.get("CONVERTER_SANDBOX")
        os.environ["CONVERTER_SANDBOX"] = "off"
        try:
            before = _children_cpu()
            pdf = render_pdf(html, max_pages=100 * size)
            printing = _children_cpu() - before
        finally:
            if sandboxed is None:
                del os.environ["CONVERTER_SANDBOX"]
            else:
                os.environ["CONVERTER_SANDBOX"] = sandboxed
        split = _best(lambda pdf=pdf: together.split(pdf, size), rounds)
        parts = together.split(pdf, size)
        sheet = part_check.Sheet.of("\n".join(together._STYLE.findall(documents[0].document.head)))

        def check(parts=parts, documents=documents, sheet=sheet):
            found = [
                part_check.problem(part_check.Expected.of(d.scanned, sheet), shown, first=parts[0][1])
                for d, (_, shown) in zip(documents, parts)
            ]
            assert found == [None] * len(found), found

        checking = _best(check, rounds)
        per_doc = {name: seconds / size * 1000 for name, seconds in (("read", read), ("split", split))}
        per_doc["check"] = checking / size * 1000
        render_ms = printing / size * 1000
        label = f"a contract {kind}, runs of {size}" + (" (small)" if small else "")
        figures += [
            Figure(
                f"checking every part (reading each document + checking its part), {label}",
                per_doc["read"] + per_doc["check"],
                "ms/doc",
                "",
                None,
                (per_doc["read"] + per_doc["check"]) / render_ms if render_ms else None,
                f"wkhtmltopdf's CPU for the run {render_ms:.2f} ms/doc",
            ),
            Figure(
                f"splitting the run (fonts cut, what each part shows read), {label}",
                per_doc["split"],
                "ms/doc",
                "",
                None,
                per_doc["split"] / render_ms if render_ms else None,
                f"wkhtmltopdf's CPU for the run {render_ms:.2f} ms/doc",
            ),
        ]
    return figures
