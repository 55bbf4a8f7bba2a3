"""What signers filled in, in the signed PDF: each value stamped at its field's box before the seal, in
every template kind, in that recipient's document only, and listed on the audit certificate with who gave it, when,
and an attachment's sha256; a routed request's next party reads the values the first party gave. Real renders
(wkhtmltopdf, LibreOffice, pypdf), real workers, poppler's pdftotext, pdftoppm and pdfsig. The values are given as
the signing page's form sends them (typed in the batch's language), and sign() checks and saves them with the sign."""

from __future__ import annotations

import hashlib
import re
import subprocess
import unicodedata
from datetime import timedelta
from pathlib import Path

from docx import Document as WordDocument
from PIL import Image
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.fields import FieldSettings, shown_value
from bulksign.doc_templates.versions import create_template, place_boxes, save_fields
from bulksign.documents.audit_record import FilledField
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import check_seal
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.signed_pdf import stamp_parties
from bulksign.documents.storage import get_storage
from bulksign.models import Document, FieldValue, Party, SigningRequest, utcnow
from bulksign.signing.field_checks import TICKED
from bulksign.signing.field_entry import Upload
from bulksign.signing.page_states import signer_party
from bulksign.work.pipeline import enqueue_renders
from tests.doc_templates.test_fields import _form
from tests.support import docx_files
from tests.support.batches import batch_from_file, request_ids
from tests.support.form_signing import filled_form, sign_filled
from tests.support.looks import ARTIFACTS
from tests.support.pdf_files import plain_pdf
from tests.support.sealed import make_pdf, signed_request
from tests.support.signing_requests import HTML

PAGE = '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">{body}</body>'
#: An employment contract asking the employee for every kind of value; the bonus only where the row's region is EU.
CONTRACT = PAGE.format(
    body="<h1>Трудовой договор</h1><p>Работник {{ name }}.</p>"
    "<p>IBAN: {{ field_iban }}</p><p>Город: {{ field_city }}</p><p>Дата начала: {{ field_start }}</p>"
    "<p>Оклад: {{ field_salary }}</p><p>С правилами ознакомлен: {{ field_agree }}</p>"
    "<p>Паспорт: {{ field_passport }}</p>"
    '{% if region == "EU" %}<p>Премия: {{ field_bonus }}</p>{% endif %}<p>{{ signature }}</p>'
)
SETTINGS = [
    {"name": "iban", "label": "IBAN"},
    {"name": "city", "label": "Город"},
    {"name": "start", "type": "date", "label": "Дата начала"},
    {"name": "salary", "type": "number", "label": "Оклад"},
    {"name": "agree", "type": "checkbox", "label": "С правилами ознакомлен"},
    {"name": "passport", "type": "attachment", "label": "Паспорт"},
    {"name": "bonus", "label": "Премия"},
]
TWO = "email,name,region\neva@example.com,Eva Employee,RU\nboris@example.com,Boris Brown,RU\n"
IBAN = "DE89 3704 0044 0532 0130 00"
#: The employee's passport, scanned (a real PDF: the signing page refuses a file that does not open as one).
SCAN = plain_pdf(text="Passport, scanned")


def _version(
    users,
    *,
    fields: list[dict],
    html: str | None = None,
    kind: str = "html",
    file: bytes | None = None,
    boxes: list[dict] | None = None,
):
    """A template of ``kind`` (with ``boxes`` placed in the box editor) and ``fields``' settings; every field
    optional: what is given here is the rows."""
    saved = create_template(
        db.session, name="Contract", html=html, user=users["staff"], now=utcnow(), kind=kind, file=file
    )
    if boxes:
        place_boxes(db.session, template=saved.template, boxes=boxes, user=users["staff"], now=utcnow())
    return save_fields(
        db.session,
        template=saved.template,
        fields=[{**f, "required": False} for f in fields],
        user=users["staff"],
        now=utcnow(),
    ).version


def _sent(users, run_jobs, version, *, rows: str, form: dict | None = None, **batch) -> list[int]:
    """A batch of ``rows`` on ``version``, through the file check and batch creation, rendered and sent."""
    batch = batch_from_file(
        user=users["staff"],
        version=version,
        rows=rows,
        form=form,
        now=utcnow() - timedelta(minutes=5),
        **{"name": "Contracts", **batch},
    )
    ids = request_ids(batch.id)
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    return ids


def _value(request_id: int, name: str) -> FieldValue:
    """The row sign() saved for the field ``name``."""
    return db.session.scalars(
        select(FieldValue).where(FieldValue.request_id == request_id, FieldValue.name == name)
    ).one()


def _document(request_id: int, kind: str) -> Document:
    db.session.expire_all()
    return db.session.scalars(
        select(Document).where(Document.request_id == request_id, Document.kind == kind).order_by(Document.id.desc())
    ).first()


def _file(pdf: bytes, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(pdf)
    return path


def _text(pdf: bytes, tmp_path: Path, *pages: int) -> str:
    """pdftotext of ``pages`` (from 0; all by default), its spaces (the no-break ones Russian numbers and dates
    use) made plain."""
    span = ["-f", str(pages[0] + 1), "-l", str(pages[-1] + 1)] if pages else []
    path = _file(pdf, tmp_path, "text.pdf")
    out = subprocess.run(["pdftotext", *span, str(path), "-"], capture_output=True, text=True, timeout=30).stdout
    return " ".join(unicodedata.normalize("NFKC", out).split())


def _words_in(pdf: bytes, tmp_path: Path, box: SignatureBox) -> list[str]:
    """The words pdftotext places inside ``box`` (its own pixels: top-left origin), the box in PDF points."""
    path = _file(pdf, tmp_path, "bbox.pdf")
    html = subprocess.run(
        ["pdftotext", "-bbox", "-f", str(box.page + 1), "-l", str(box.page + 1), str(path), "-"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    height = float(re.search(r'<page width="[\d.]+" height="([\d.]+)"', html).group(1))
    top, bottom = height - (box.y + box.h), height - box.y
    inside = []
    for x0, y0, x1, y1, word in re.findall(
        r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>', html
    ):
        if (
            box.x - 0.5 <= float(x0)
            and float(x1) <= box.x + box.w + 0.5
            and top - 0.5 <= float(y0) <= float(y1) <= bottom + 0.5
        ):
            inside.append(word)
    return inside


def _ink(pdf: bytes, tmp_path: Path, box: SignatureBox, *, inset: int = 0) -> int:
    """How many dark pixels the box shows at 144 dpi, ``inset`` pixels in from its edges (inside its frame)."""
    path = _file(pdf, tmp_path, "ink.pdf")
    scale = 2  # 144 dpi: two pixels per point
    subprocess.run(
        ["pdftoppm", "-png", "-r", "144", "-f", str(box.page + 1), "-l", str(box.page + 1), "-singlefile",
         str(path), str(tmp_path / "ink")],
        check=True, timeout=60,
    )  # fmt: skip
    image = Image.open(tmp_path / "ink.png").convert("L")
    left, top = box.x * scale, image.height - (box.y + box.h) * scale
    area = (left - 1 + inset, top - 1 + inset, left + box.w * scale + 1 - inset, top + box.h * scale + 1 - inset)
    return sum(image.crop(tuple(round(v) for v in area)).histogram()[:128])


def _picture(pdf: bytes, tmp_path: Path, name: str, page: int) -> Path:
    """The page as a person sees it (80 dpi), kept with the test's artefacts for a reviewer to open."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = _file(pdf, tmp_path, f"{name}.pdf")
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", str(page + 1), "-l", str(page + 1), "-singlefile", str(path),
         str(ARTIFACTS / name)],
        check=True, timeout=60,
    )  # fmt: skip
    return ARTIFACTS / f"{name}.png"


def _signed(request_id: int) -> bytes:
    return get_storage().get(_document(request_id, "signed").storage_key)


def test_an_html_contracts_values_are_stamped_in_their_boxes_in_that_recipients_pdf_and_listed_on_its_certificate(
    app, users, smtp, run_jobs, tmp_path
):
    version = _version(users, fields=SETTINGS, html=CONTRACT)
    eva, boris = _sent(users, run_jobs, version, rows=TWO, language="ru", timezone="Europe/Moscow")
    sign_filled(
        eva,
        "Eva Employee",
        typed={
            "iban": IBAN,
            "city": "Санкт-Петербург",
            "start": "2027-01-31",
            "salary": "123 456,5",  # as a Russian signer writes it
            "agree": TICKED,
            # A field of her role, so her form asks for it, though its mark is under a condition her row skipped:
            # listed, not stamped.
            "bonus": "Годовая премия",
        },
        files={"passport": Upload(filename="паспорт-скан.pdf", data=SCAN)},
    )
    # Boris leaves the checkbox unticked (the form sends nothing for it), the passport and the bonus empty.
    sign_filled(
        boris,
        "Boris Brown",
        typed={"iban": "GB33BUKB20201555555555", "city": "Казань", "start": "2027-02-01", "salary": "900"},
    )
    run_jobs("pdf", "mail")
    scan_key = _value(eva, "passport").storage_key

    original = _document(eva, "original")
    boxes = {n: SignatureBox.from_json(b) for n, b in original.field_boxes.items()}
    assert "bonus" not in boxes
    signed = _signed(eva)
    # In Eva's document, each value in its own box, in the batch's language (Russian dates and separators).
    document = _text(signed, tmp_path, 0)
    for shown in (IBAN, "Санкт-Петербург", "31 января 2027 г.", "123 456,5", "паспорт-скан.pdf"):
        assert shown in document, shown
    assert " ".join(_words_in(signed, tmp_path, boxes["iban"])) == IBAN
    assert _words_in(signed, tmp_path, boxes["city"]) == ["Санкт-Петербург"]
    assert _words_in(signed, tmp_path, boxes["passport"]) == ["паспорт-скан.pdf"]
    assert "Годовая премия" not in document
    # In Boris's, his own values and none of Eva's.
    his = _text(_signed(boris), tmp_path, 0)
    assert "GB33BUKB20201555555555" in his and "Казань" in his and "1 февраля 2027 г." in his
    assert "DE89" not in his and "Санкт-Петербург" not in his and "паспорт" not in his
    # Eva's box is ticked, Boris's is an empty box: a frame with nothing inside.
    ticked, empty = (_ink(pdf, tmp_path, boxes["agree"], inset=4) for pdf in (signed, _signed(boris)))
    assert ticked > 40 and empty == 0, (ticked, empty)
    assert _ink(_signed(boris), tmp_path, boxes["agree"]) > 40
    # The passport Boris left empty is struck through, so nothing can be written in it after the seal; Eva's is not.
    struck, filled = (_ink(pdf, tmp_path, boxes["passport"], inset=4) for pdf in (_signed(boris), signed))
    box_px = boxes["passport"].w * 2 - 8
    assert struck > box_px * 0.8, (struck, box_px)
    assert not _words_in(_signed(boris), tmp_path, boxes["passport"])

    # The certificate lists every value, the box-less one too, with who gave it and when; the attachment's hash is
    # the stored file's.
    first = len(_pages(get_storage().get(original.storage_key)))  # the signature is in its box: no page added
    certificate = _text(signed, tmp_path, *range(first, len(_pages(signed))))
    for shown in (
        "Дата начала 31 января 2027 г.",
        "Премия Годовая премия",
        "Получатель: Eva Employee <eva@example.com>",
        "Europe/Moscow",
        f"sha256 {hashlib.sha256(get_storage().get(scan_key)).hexdigest()}",
    ):
        assert shown in certificate, shown
    # The seal covers it all.
    assert check_seal(signed, seal_key(app.config)).valid
    out = subprocess.run(
        ["pdfsig", str(_file(signed, tmp_path, "sealed.pdf"))], capture_output=True, text=True, timeout=30
    ).stdout
    assert "Signature is Valid" in out and "Total document signed" in out
    _picture(signed, tmp_path, "filled-fields-html", 0)
    _picture(signed, tmp_path, "filled-fields-certificate", first)


def _pages(pdf: bytes):
    from io import BytesIO

    from pypdf import PdfReader

    return PdfReader(BytesIO(pdf)).pages


def _each_signs_their_own(users, run_jobs, version, *, eva: dict, boris: dict) -> tuple[int, int]:
    """Eva's and Boris's requests on ``version``, each signed with the values its form sends, and sealed."""
    ids = _sent(
        users, run_jobs, version, rows="email,name\neva@example.com,Eva Employee\nboris@example.com,Boris Brown\n"
    )
    for request_id, name, typed in zip(ids, ("Eva Employee", "Boris Brown"), (eva, boris), strict=True):
        sign_filled(request_id, name, typed=typed)
    run_jobs("pdf", "mail")
    return ids[0], ids[1]


def _only_in_its_own(app, tmp_path, eva: int, boris: int, *, field: str, value: str, page: int = 0) -> None:
    """Eva's value is in her signed PDF, inside its field's box, and nowhere in Boris's; her seal holds."""
    box = SignatureBox.from_json(_document(eva, "original").field_boxes[field])
    assert box.page == page
    assert " ".join(_words_in(_signed(eva), tmp_path, box)) == value
    assert value not in _text(_signed(boris), tmp_path)
    assert check_seal(_signed(eva), seal_key(app.config)).valid


def test_a_word_contracts_values_are_stamped_in_their_boxes(app, users, smtp, run_jobs, tmp_path):
    document = WordDocument()
    document.add_paragraph("Employee {{ name }}. IBAN: {{ field_iban }}")
    document.add_paragraph("I have read the work rules: {{ field_agree }}")
    version = _version(
        users,
        fields=[{"name": "iban"}, {"name": "agree", "type": "checkbox"}],
        kind="docx",
        file=docx_files.save(document),
    )
    eva, boris = _each_signs_their_own(
        users, run_jobs, version, eva={"iban": IBAN, "agree": TICKED}, boris={"iban": "GB33"}
    )
    _only_in_its_own(app, tmp_path, eva, boris, field="iban", value=IBAN)
    agree = SignatureBox.from_json(_document(eva, "original").field_boxes["agree"])
    assert _ink(_signed(eva), tmp_path, agree, inset=4) > 40 and _ink(_signed(boris), tmp_path, agree, inset=4) == 0
    _picture(_signed(eva), tmp_path, "filled-fields-word", 0)


def test_a_pdf_forms_field_takes_its_value(app, users, smtp, run_jobs, tmp_path):
    source = _form(("name", "text", 0, 700), ("field_iban", "text", 0, 600), ("field_agree", "checkbox", 0, 500))
    version = _version(users, fields=[{"name": "iban"}, {"name": "agree", "type": "checkbox"}], kind="pdf", file=source)
    eva, boris = _each_signs_their_own(
        users, run_jobs, version, eva={"iban": "Москва, ул. Тверская 1"}, boris={"iban": "GB33"}
    )  # neither ticks the box
    _only_in_its_own(app, tmp_path, eva, boris, field="iban", value="Москва, ул. Тверская 1")
    # A form's check box leaves no frame of its own: the stamp draws the empty box.
    agree = SignatureBox.from_json(_document(eva, "original").field_boxes["agree"])
    assert _ink(_signed(eva), tmp_path, agree) > 40 and _ink(_signed(eva), tmp_path, agree, inset=4) == 0
    _picture(_signed(eva), tmp_path, "filled-fields-pdf-form", 0)


def test_a_box_placed_in_the_box_editor_takes_its_value(app, users, smtp, run_jobs, tmp_path):
    source = _form(("name", "text", 0, 700))
    version = _version(
        users,
        fields=[{"name": "start", "type": "date"}],
        kind="pdf",
        file=source,
        boxes=[{"name": "field_start", "page": 1, "x": 72, "y": 400, "w": 150, "h": 20}],
    )
    eva, boris = _each_signs_their_own(
        users, run_jobs, version, eva={"start": "2027-01-31"}, boris={"start": "2027-03-01"}
    )
    _only_in_its_own(app, tmp_path, eva, boris, field="start", value="January 31, 2027", page=1)
    assert "March 1, 2027" in _text(_signed(boris), tmp_path, 1)


ROUTED = PAGE.format(
    body="<h1>Employment contract</h1><p>Employee {{ name }} joins ACME.</p><p>IBAN: {{ field_iban }}</p>"
    "<p>The employee: {{ signature }}</p><p>Employer's reference: {{ field_reference }}</p>"
    "<p>For the employer: {{ signature_employer }}</p>"
)


def test_the_second_party_reads_the_first_partys_values_and_the_seal_carries_both(app, users, smtp, run_jobs, tmp_path):
    version = _version(users, fields=[{"name": "iban"}, {"name": "reference", "role": "employer"}], html=ROUTED)
    (request_id,) = _sent(
        users,
        run_jobs,
        version,
        rows="email,name\neva@example.com,Eva Employee\n",
        form={"parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}'},
    )
    request = db.session.get(SigningRequest, request_id)
    sign_filled(request_id, "Eva Employee", party=signer_party(db.session, request, None), typed={"iban": IBAN})
    run_jobs("pdf", "mail")  # the employee's step kept as a version with her signature and her values

    original, step = _document(request_id, "original"), _document(request_id, "step")
    assert step.field_boxes == original.field_boxes  # the employer's page places the fields as the original
    boxes = {n: SignatureBox.from_json(b) for n, b in original.field_boxes.items()}
    read = get_storage().get(step.storage_key)
    assert " ".join(_words_in(read, tmp_path, boxes["iban"])) == IBAN
    assert _words_in(read, tmp_path, boxes["reference"]) == []  # the employer's own field, still empty

    employer = db.session.scalars(select(Party).where(Party.request_id == request_id, Party.role == "employer")).one()
    sign_filled(request_id, "Anna Boss", party=employer, typed={"reference": "HR-2027/17"})
    run_jobs("pdf", "mail")
    signed = _signed(request_id)
    assert " ".join(_words_in(signed, tmp_path, boxes["iban"])) == IBAN
    assert _words_in(signed, tmp_path, boxes["reference"]) == ["HR-2027/17"]
    text = _text(signed, tmp_path)
    assert text.count(IBAN) == 2  # in its box and on the certificate, once each
    assert "Recipient: Eva Employee <eva@example.com>" in text and "Employer: Anna Boss <hr@acme.example>" in text
    assert check_seal(signed, seal_key(app.config)).valid
    _picture(signed, tmp_path, "filled-fields-routed", 0)


def test_a_value_reads_in_the_batchs_language_and_an_odd_one_as_it_is(app):
    from flask_babel import force_locale

    def shown(field_type: str, value: str | None, language: str = "en") -> str:
        with force_locale(language):
            return str(shown_value(FieldSettings(name="x", type=field_type), value, language=language))

    assert shown("number", "1234567.125") == "1,234,567.125" and shown("number", "-5") == "-5"
    assert shown("number", "1234.5", "ru") == "1\xa0234,5"
    assert (
        shown("date", "2027-01-31") == "January 31, 2027"
        and shown("date", "2027-01-31", "ru") == "31 января 2027\u202fг."
    )
    assert (shown("checkbox", "true"), shown("checkbox", "false")) == ("Ticked", "Not ticked")
    assert shown("text", "  as typed ") == "  as typed " and shown("attachment", "scan.pdf") == "scan.pdf"
    assert shown("text", None) == shown("date", "") == ""
    # Not in its canonical form (a row written by hand): shown as it is, never a failed seal.
    assert shown("number", "12,5") == "12,5" and shown("date", "31.01.2027") == "31.01.2027"


def test_a_long_value_is_made_smaller_and_wrapped_inside_its_box_and_cut_only_past_the_smallest_size(app, tmp_path):
    box = SignatureBox(page=0, x=72, y=600, w=170, h=22.7)
    address = "Российская Федерация, 190000, Санкт-Петербург, Невский проспект, дом 28, квартира 14"

    def stamped(text: str) -> list[str]:
        field = FilledField(
            label="Address", text=text, ticked=None, box=box, role="recipient", name="Eva", email="eva@example.com",
            entered_at=utcnow(), entered_ip="",
        )  # fmt: skip
        pdf = stamp_parties(make_pdf(), [], document_name="Contract", language="en", zone="UTC", fields=[field])
        return _words_in(pdf, tmp_path, box)

    assert " ".join(stamped(address)) == address  # two lines, smaller
    cut = " ".join(stamped(" ".join([address] * 4)))
    assert cut.startswith("Российская Федерация") and cut.endswith("…")


def test_a_value_of_a_request_with_no_party_rows_is_listed_as_its_recipients(app, users, run_jobs, tmp_path):
    # Made as before parties: the request is its only signer. Its note's mark is under a condition its row skips.
    request = signed_request(
        owner=users["staff"],
        html=HTML.replace("</body>", '{% if number == "0" %}<p>{{ field_note }}</p>{% endif %}</body>'),
        fields=[{"name": "note"}],
        filled=filled_form({"note": "Позвоните после 18:00"}),
    )
    run_jobs("pdf")
    text = _text(_signed(request.id), tmp_path)
    assert "Note Позвоните после 18:00" in text and "Recipient: Иван Петров <ivan@example.com>" in text
    assert text.count("Позвоните") == 1  # the document marks no such field: listed, not stamped
