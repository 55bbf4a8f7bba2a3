"""Which of a file's columns most likely fills each template column whose name the file does not use: by the
header's name (either language, transliterated, common synonyms) and by the shape of its first values. Only
suggestions: staff confirm them (``column_mapping``). More in docs/architecture/recipients.md."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from bulksign.recipients.rows import normalise_header

#: Other names of a column, after ``_canonical``: what HR and CRM exports call it, in English and Russian.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "name": (
        "fio",
        "full_name",
        "fullname",
        "фио",
        "ф_и_о",
        "сотрудник",
        "работник",
        "employee",
        "employee_name",
        "имя_и_фамилия",
        "фамилия_имя_отчество",
        "получатель",
        "recipient",
    ),
    "email": ("e_mail", "почта", "эл_почта", "электронная_почта", "адрес_почты", "емейл", "имейл", "mail_address"),
    "phone": ("телефон", "тел", "мобильный", "мобильный_телефон", "номер_телефона", "сотовый", "mobile", "cell"),
    "position": ("должность", "job_title", "title", "job", "role", "позиция", "post"),
    "department": ("отдел", "подразделение", "department", "division", "dept"),
    "address": ("адрес", "адрес_проживания", "адрес_регистрации", "почтовый_адрес", "postal_address"),
    "start_date": ("дата_начала", "дата_приема", "дата_приёма", "дата_выхода", "start", "hire_date", "hired"),
    "salary": ("оклад", "зарплата", "заработная_плата", "сумма", "amount", "pay", "wage"),
    "personnel_number": ("табельный_номер", "таб_номер", "табельный", "таб", "employee_id", "employee_number"),
}
#: The parts of a person's name some exports keep in columns of their own, in the order they are joined.
NAME_PARTS: tuple[tuple[str, ...], ...] = (
    ("фамилия", "last_name", "surname", "family_name"),
    ("имя", "first_name", "given_name"),
    ("отчество", "middle_name", "patronymic"),
)
#: Russian letters as a header typed in Latin letters spells them ("Dolzhnost" for "Должность").
_CYRILLIC = str.maketrans(
    {
        **dict(zip("абвгдезийклмнопрстуфхцы", "abvgdeziyklmnoprstufhcy", strict=True)),
        "ё": "e",
        "ж": "zh",
        "ч": "ch",
        "ш": "sh",
        "щ": "shch",
        "ъ": "",
        "ь": "",
        "э": "e",
        "ю": "yu",
        "я": "ya",
    }
)
_NOT_LETTER = re.compile(r"[\W_]+")

#: Values of a kind, and the template columns whose names say they hold that kind.
_SHAPES: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+"),
    # With a country code, or ten digits and more: a salary of 1 200 000 is not a phone number.
    "phone": re.compile(r"\+(?=(?:\D*\d){7,15}\D*$)[\d\s().-]{7,24}|(?=(?:\D*\d){10,15}\D*$)[\d\s().-]{10,24}"),
    "date": re.compile(
        r"\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2})?)?|\d{1,2} [^\W\d_]+\.? \d{4}( г\.?)?"
    ),
    "address": re.compile(
        r".*\b(ул|улица|пр|проспект|пер|д|дом|кв|г|street|st|avenue|ave|road|rd|str|straße)\b\.?.*\d.*|"
        r".*\d.*\b(ул|улица|проспект|street|avenue|road|straße)\b.*",
        re.IGNORECASE,
    ),
    "number": re.compile(r"[-+]?[\d\s\u00a0\u202f]*\d([.,]\d+)?\s*(₽|руб\.?|р\.|€|\$|£|%)?"),
}
_KIND_WORDS = (
    ("email", ("email", "mail", "почта")),
    ("phone", ("phone", "tel", "mobile", "телефон")),
    ("date", ("date", "дата", "day", "день")),
    ("address", ("address", "адрес")),
    ("number", ("salary", "amount", "sum", "price", "оклад", "сумма", "зарплата", "number", "номер")),
)
#: How sure a guess is: the same name, a synonym or transliteration, a name inside the header, the values' shape.
EXACT, SYNONYM, CONTAINS, SHAPE = 100, 90, 60, 40


def _canonical(text: str) -> str:
    """A header or name as guesses compare them: normalised, Russian letters in Latin ones, letters and digits."""
    return _NOT_LETTER.sub("", normalise_header(text).translate(_CYRILLIC))


def _kind(column: str) -> str | None:
    """The kind of values a template column's name says it holds (``start_date``: a date), if any."""
    key = normalise_header(column)
    return next((kind for kind, words in _KIND_WORDS if any(w in key for w in words)), None)


def shape_of(values: Sequence[str]) -> str | None:
    """The kind most of these values have (``email``, ``phone``, ``date``, ``address``, ``number``), if one does."""
    filled = [v.strip() for v in values if v.strip()]
    if not filled:
        return None
    for kind, pattern in _SHAPES.items():
        if sum(1 for v in filled if pattern.fullmatch(v)) * 3 >= len(filled) * 2:
            return kind
    return None


def _score(column: str, header: str, shape: str | None) -> int:
    names = {_canonical(column), *(_canonical(s) for s in SYNONYMS.get(normalise_header(column), ()))}
    said = _canonical(header)
    if not said:
        return 0
    if said == _canonical(column):
        return EXACT
    if said in names:
        return SYNONYM
    if any(len(n) >= 4 and (n in said or said in n) for n in names):
        return CONTAINS
    kind = _kind(column)
    return SHAPE if kind is not None and kind == shape else 0


def suggest(
    columns: Iterable[str],
    *,
    headers: Sequence[str],
    samples: Mapping[str, Sequence[str]],
    taken: Iterable[str] = (),
) -> dict[str, tuple[str, ...]]:
    """For each of ``columns`` (template columns the file does not name), the file's header(s) that likely fill it:
    each header at most once, the surest guesses first; ``name`` may get its parts (Фамилия, Имя, Отчество) to join.
    ``taken``: headers already used by a column of their own name."""
    free = [h for h in headers if h and h not in set(taken)]
    shapes = {h: shape_of(samples.get(h, ())) for h in free}
    wanted = list(dict.fromkeys(columns))
    guesses = sorted(
        (
            (score, -wanted.index(c), -free.index(h), c, h)
            for c in wanted
            for h in free
            if (score := _score(c, h, shapes[h]))
        ),
        reverse=True,
    )
    found: dict[str, tuple[str, ...]] = {}
    used: set[str] = set()
    if "name" in wanted and not any(c == "name" and score >= SYNONYM for score, _, _, c, _ in guesses):
        # A name kept in parts is joined rather than one part taken for all of it.
        parts = [
            next((h for h in free if _canonical(h) in {_canonical(n) for n in names}), None) for names in NAME_PARTS
        ]
        if parts[0] and parts[1]:
            found["name"] = tuple(p for p in parts if p)
            used.update(found["name"])
    for *_, column, header in guesses:
        if column not in found and header not in used:
            found[column] = (header,)
            used.add(header)
    return {c: found[c] for c in wanted if c in found}
