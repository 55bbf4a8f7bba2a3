"""Checking an .xlsx whose columns are named otherwise than the template's, through a mapping, against the same
rows under the template's own names: within 1.5× (a name joined from three columns too).

Each pair of workbooks is an HR export of 100,000 rows (CI: 2,000) whose dates and salaries are formatted cells, read as
the sheet shows them; each pair of checks is timed in turns, three times, in this process and the fastest run of each kept.
"""

from __future__ import annotations

import io
import time
from datetime import datetime
from unittest.mock import patch

from bench import Figure

VARIABLES = ["name", "position", "start_date", "salary"]
TARGET_RATIO = 1.5
OWN_NAMES = ["email", "name", "position", "start_date", "salary"]
RUSSIAN = ["Почта", "ФИО", "Должность", "Дата начала", "Оклад"]
SPLIT = ["Почта", "Фамилия", "Имя", "Отчество", "Должность", "Дата начала", "Оклад"]
#: The same seven columns under the template's names (the two extra ones unused): the joined check's baseline,
#: so that both read as many cells.
OWN_SPLIT = ["email", "name", "given_name", "patronymic", "position", "start_date", "salary"]


def make_xlsx(rows: int, header: list[str]) -> bytes:
    """An export with ``header``: a name in one column, or in three (Фамилия, Имя, Отчество)."""
    import openpyxl
    from openpyxl.cell import WriteOnlyCell

    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet()
    sheet.append(header)
    split = len(header) == len(SPLIT)
    for i in range(rows):
        day = WriteOnlyCell(sheet, datetime(2027, 1 + i % 12, 1 + i % 28))
        day.number_format = "DD.MM.YYYY"
        pay = WriteOnlyCell(sheet, 60_000 + i % 90_000)
        pay.number_format = '#,##0 "₽"'
        name = ["Сотрудников", f"Номер{i}", "Иванович"] if split else [f"Сотрудников Номер{i} Иванович"]
        sheet.append([f"employee.{i}@company{i % 300}.example.com", *name, "Инженер-технолог", day, pay])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def _fastest_pair(unmapped, mapped, *, runs: int = 3) -> tuple[float, float]:
    """The fastest of ``runs`` timings of each check, taken in turns, so that a load on the machine that comes and
    goes weighs on both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(runs):
        for i, (check, data) in enumerate((unmapped, mapped)):
            started = time.perf_counter()
            report = check(data)
            best[i] = min(best[i], time.perf_counter() - started)
            assert report.invalid_rows == 0, report.errors[:3]
    return best[0], best[1]


def run(*, small: bool) -> list[Figure]:
    from bulksign.recipients import files
    from bulksign.recipients.column_mapping import parse_mapping
    from bulksign.recipients.validation import validate_recipients

    rows = 2_000 if small else 100_000

    def checked(mapping=None):
        return lambda data: validate_recipients(
            data, filename="export.xlsx", variables=VARIABLES, mapping=mapping, language="ru"
        )

    renamed = parse_mapping(dict(zip(OWN_NAMES, RUSSIAN, strict=True)))
    joined = parse_mapping({**renamed.to_json(), "name": ["Фамилия", "Имя", "Отчество"]})
    figures = []
    for label, mapping, header, own in (
        ("columns renamed", renamed, RUSSIAN, OWN_NAMES),
        ("a name joined from three columns", joined, SPLIT, OWN_SPLIT),
    ):
        # The time limit of a web request is not what is measured here: a loaded machine may read past it.
        with patch.object(files.rows, "MAX_READ_SECONDS", 3600):
            baseline, seconds = _fastest_pair(
                (checked(), make_xlsx(rows, own)), (checked(mapping), make_xlsx(rows, header))
            )
        figures.append(
            Figure(
                name=f"check {rows:,} .xlsx rows through a mapping: {label}",
                value=seconds,
                unit="s",
                target=f"≤ {TARGET_RATIO:g}× without",
                ok=seconds <= TARGET_RATIO * baseline,
                ratio=seconds / baseline,
                baseline=f"the template's own column names {baseline:.2f} s",
            )
        )
    return figures
