"""Checking a recipients CSV: 10,000 rows under 1 s, 100,000 under 8 s, streaming in under 200 MB.

Baseline: Python's bare ``csv.reader`` over the same bytes (decode + split), in the same run.
An .xlsx is checked at under 1 s per MB of upload, and every hostile file of the security sweep
(tests/support/hostile_files.py) is refused in under 1 s: a web worker checks files in the request.
"""

from __future__ import annotations

import csv
import io
import time
import tracemalloc

from bench import Figure

VARIABLES = ["name", "position", "start_date", "salary", "city"]
TARGETS = {10_000: 1.0, 100_000: 8.0}


def make_csv(rows: int) -> bytes:
    """A realistic export: semicolons, Cyrillic names, 1% bad rows (typo domains, duplicates, empty values)."""
    out = io.StringIO()
    out.write("Email;Name;Position;Start date;Salary;City;Phone\r\n")
    for i in range(rows):
        email = f"employee.{i}@company{i % 300}.example.com"
        if i % 100 == 7:
            email = f"employee.{i}@gmial.com"
        elif i % 100 == 8:
            email = "employee.1@company1.example.com"
        position = "" if i % 100 == 9 else "Инженер-технолог"
        out.write(
            f"{email};Сотрудник Номер {i};{position};2027-01-{1 + i % 28:02d};{3000 + i % 900} EUR;Москва;"
            f"+7 916 {i % 10_000_000:07d}\r\n"
        )
    return out.getvalue().encode("utf-8-sig")


def _bare_reader(data: bytes) -> int:
    return sum(1 for _ in csv.reader(io.StringIO(data.decode("utf-8-sig")), delimiter=";"))


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


def run(*, small: bool) -> list[Figure]:
    from bulksign.recipients.validation import validate_recipients

    figures = []
    sizes = (1_000, 10_000) if small else (10_000, 100_000)
    for rows in sizes:
        data = make_csv(rows)
        seconds, report = _timed(validate_recipients, data, filename="people.csv", variables=VARIABLES)
        assert report.total_rows == rows and report.invalid_rows > 0
        baseline, _ = _timed(_bare_reader, data)
        target = TARGETS.get(rows)
        figures.append(
            Figure(
                name=f"validate {rows:,} rows",
                value=seconds,
                unit="s",
                target=f"< {target:g} s" if target else "",
                ok=seconds < target if target else None,
                ratio=seconds / baseline,
                baseline=f"bare csv.reader {baseline:.3f} s",
            )
        )
    # Peak memory of the biggest check, measured apart: tracing slows the run down.
    tracemalloc.start()
    validate_recipients(data, filename="people.csv", variables=VARIABLES)
    peak_mb = tracemalloc.get_traced_memory()[1] / 1024 / 1024
    tracemalloc.stop()
    figures.append(
        Figure(
            name=f"peak memory while validating {sizes[-1]:,} rows (file {len(data) / 1e6:.1f} MB)",
            value=peak_mb,
            unit="MB",
            target="< 200 MB",
            ok=peak_mb < 200,
        )
    )
    figures.append(_xlsx_per_mb(sizes[-1], csv_seconds=seconds))
    figures.append(_slowest_refusal())
    return figures


def _xlsx_per_mb(rows: int, *, csv_seconds: float) -> Figure:
    import openpyxl

    from bulksign.recipients.validation import validate_recipients

    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet()
    for line in make_csv(rows).decode("utf-8-sig").splitlines():
        sheet.append(line.split(";"))
    out = io.BytesIO()
    workbook.save(out)
    data = out.getvalue()
    seconds, report = _timed(validate_recipients, data, filename="people.xlsx", variables=VARIABLES)
    assert report.total_rows == rows
    per_mb = seconds / (len(data) / 1e6)
    return Figure(
        name=f"validate {rows:,} rows as .xlsx ({len(data) / 1e6:.1f} MB), per MB",
        value=per_mb,
        unit="s",
        target="< 1 s",
        ok=per_mb < 1,
        ratio=seconds / csv_seconds,
        baseline=f"the same rows as CSV {csv_seconds:.2f} s",
    )


def _slowest_refusal() -> Figure:
    from bulksign.recipients.rows import UploadError
    from bulksign.recipients.validation import validate_recipients
    from tests.support.hostile_files import HOSTILE_RECIPIENT_FILES

    slowest, which = 0.0, ""
    for name, (filename, build) in HOSTILE_RECIPIENT_FILES.items():
        data = build()
        started = time.perf_counter()
        try:
            validate_recipients(data, filename=filename, variables=VARIABLES)
        except UploadError:
            pass
        else:
            raise AssertionError(f"{name} was not refused")
        if time.perf_counter() - started > slowest:
            slowest, which = time.perf_counter() - started, name
    return Figure(
        name=f"slowest refusal of a hostile file ({which})", value=slowest, unit="s", target="< 1 s", ok=slowest < 1
    )
