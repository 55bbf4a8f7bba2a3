"""What a signer sends for their fields cannot hurt the server or the people who open it: a picture that unpacks to
hundreds of megabytes is refused from its header in well under a second and pictures decoded at once share one
memory budget; a file is named by the type its content was found to be wherever it goes out; a PDF's active content
is taken out (the file as given keeps its hash on the certificate and in the evidence package); and bidirectional
controls never reach a stored value. Through the real signing page, workers, seal and exports."""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import subprocess
import zipfile
import zlib
from datetime import timedelta
from functools import cache
from pathlib import Path

from PIL import Image, ImageFile
from sqlalchemy import select

from bulksign.batches.evidence import build_evidence, start_evidence
from bulksign.batches.exports import build_signed_zip, start_signed_zip
from bulksign.core.extensions import db
from bulksign.documents.images import BUDGET, PROCESS_BUDGET_BYTES
from bulksign.documents.storage import get_storage
from bulksign.models import User, utcnow
from bulksign.people.users import create_api_key
from bulksign.signing.field_entry import FilledForm, Upload, check_entries
from bulksign.signing.signer_input import clean_signature_png
from tests.signing.test_field_entry import CONTRACT, FIELDS, GOOD, a_png, field_html, post, saved
from tests.support.accounts import STAFF
from tests.support.batches import request_ids
from tests.support.field_values import batch_with_fields, fill
from tests.support.pdf_files import active_content, hostile_form, plain_pdf
from tests.support.races import race
from tests.support.sealed import signed_document
from tests.support.signing_requests import fresh, make_sent_request

TYPED = {k.removeprefix("field-"): v for k, v in GOOD.items()}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@cache
def flat_png(width: int, height: int) -> bytes:
    """A valid RGBA PNG of ``width`` × ``height`` transparent pixels, written row by row (never held decoded):
    9,999 × 10,000 packs into 389 KB and unpacks to 400 MB."""
    packer, row = zlib.compressobj(9), b"\x00" * (1 + 4 * width)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def photo(*, progressive: bool = False) -> bytes:
    """A 12-megapixel phone photo as a JPEG: 4000 × 3000 pixels of noise, which compresses as little as a photo."""
    grey = Image.effect_noise((4000, 3000), 60)
    out = io.BytesIO()
    Image.merge("RGB", (grey, grey.rotate(180), grey.transpose(Image.Transpose.FLIP_LEFT_RIGHT))).save(
        out, "JPEG", quality=85, progressive=progressive
    )
    return out.getvalue()


def _kb(field: str) -> int:
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1))


def peak_growth_mb(run) -> tuple[float, object]:
    """How far above its size before ``run()`` this process's resident memory went while it ran (the kernel's peak,
    reset first), in MB; and what ``run()`` gave."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident size
    before = _kb("VmRSS")
    result = run()
    return (_kb("VmHWM") - before) / 1024, result


def contract(users, **kwargs):
    return make_sent_request(
        now=utcnow() - timedelta(minutes=5), owner=users["staff"], html=CONTRACT, fields=FIELDS, **kwargs
    )


def _check(request_id: int, filename: str, data: bytes):
    filled = FilledForm(
        typed=TYPED, files={"id_scan": Upload(filename=filename, data=data)}, attachment_max_bytes=10**7, storage=None
    )
    return check_entries(fresh(request_id), role="recipient", filled=filled)


def test_a_decompression_bomb_is_refused_at_its_field_undecoded_and_memory_stays_flat(app, client, users, monkeypatch):
    bomb = flat_png(9999, 10000)
    assert len(bomb) < 400 * 1024
    decoded: list[tuple[int, int]] = []
    load = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda image: decoded.append(image.size) or load(image))
    r = contract(users)
    answer = post(client, r.token, GOOD, {"field-id_scan": ("holiday.png", bomb)})
    assert answer.status_code == 422 and fresh(r.id).status == "opened" and saved(r.id) == {}
    assert "The picture for “ID scan” is too large: at most 33 megapixels. Send a smaller picture or a PDF." in (
        field_html(answer.get_data(as_text=True), "id_scan")
    )
    # Four at once (the probe's parallel POSTs): each refused, none decoded.
    growth, results = peak_growth_mb(lambda: race(app, lambda n: _check(r.id, f"{n}.png", bomb)))
    assert all(set(checked.errors) == {"id_scan"} for checked in results.values()), results
    assert decoded == [] and growth < 50, (decoded, f"memory grew by {growth:.0f} MB")


def test_pictures_checked_at_once_share_one_memory_budget_and_a_phones_photos_pass(app, users):
    r = contract(users)
    big = flat_png(4000, 4000)  # 64 MB decoded: under the limit of one picture, twelve of them thrice the budget
    BUDGET.peak = 0
    results = race(app, lambda n: _check(r.id, f"{n}.png", big), callers=12)
    assert [checked.errors for checked in results.values()] == [{}] * 12
    # Never more decoded at once than the budget: four of the twelve (the process's resident size, read by the
    # kernel, also counts what the allocator keeps after a picture is freed, so it is no exact measure here).
    assert 4000 * 4000 * 3 < BUDGET.peak <= PROCESS_BUDGET_BYTES, BUDGET.peak
    for image in (photo(), photo(progressive=True)):
        checked = _check(r.id, "IMG_0001.JPG", image)
        assert not checked.errors, checked.errors
        assert {e.name: e.value for e in checked.entries}["id_scan"] == "IMG_0001.jpg"


def test_drawn_signatures_read_at_once_share_the_budget_too(app):
    drawn = flat_png(4000, 2000)  # the largest a signature may be: 32 MB decoded, and its RGBA copy

    def read(n: int) -> int:
        return len(clean_signature_png(drawn))

    growth, results = peak_growth_mb(lambda: race(app, read, callers=12))
    assert len(results) == 12 and all(size > 0 for size in results.values())
    assert growth < 350, f"memory grew by {growth:.0f} MB"


def _staff() -> User:
    return db.session.scalar(select(User).where(User.email == STAFF[0]))


def _archive(export_id: int) -> zipfile.ZipFile:
    from bulksign.models import Export

    return zipfile.ZipFile(io.BytesIO(get_storage().get(db.session.get(Export, export_id).storage_key)))


def test_an_attachment_is_named_by_its_content_in_the_zip_the_evidence_the_download_and_the_api(
    app, client, auth, users, run_jobs
):
    names = {"invoice.bat": "invoice.pdf", "setup.exe": "setup.pdf", "report..": "report.pdf"}
    requests = {}
    for given in names:
        r = contract(users)
        assert post(client, r.token, GOOD, {"field-id_scan": (given, plain_pdf())}).status_code == 303
        assert saved(r.id)["id_scan"].value == names[given]
        requests[given] = r
    run_jobs("pdf", "mail")  # the seals
    auth.login()
    headers = {"Authorization": f"Bearer {create_api_key(db.session, user=_staff(), name='t', now=utcnow()).secret}"}
    db.session.commit()
    for given, r in requests.items():
        download = client.get(f"/batches/{r.batch_id}/requests/{r.id}/attachments/id_scan")
        assert download.headers["Content-Disposition"] == f'attachment; filename="{names[given]}"'
        api = client.get(f"/api/v1/requests/{r.id}", headers=headers).json
        assert [a["filename"] for a in api["attachments"]] == [names[given]]
        started = start_signed_zip(db.session, batch_id=r.batch_id, user=_staff(), now=utcnow())
        evidence = start_evidence(db.session, batch_id=r.batch_id, user=_staff(), now=utcnow())
        db.session.commit()
        build_signed_zip(db.session, export_id=started.export.id, storage=get_storage(), now=utcnow)
        build_evidence(db.session, export_id=evidence.export.id, storage=get_storage(), now=utcnow)
        stem = names[given].removesuffix(".pdf")
        zipped = [n for n in _archive(started.export.id).namelist() if "id_scan" in n]
        assert zipped == [f"000002-ivan@example.com-id_scan-{stem}.pdf"]
        package = _archive(evidence.export.id)
        assert [n for n in package.namelist() if "id_scan" in n] == [f"attachments/{zipped[0]}"]
        manifest = json.loads(package.read("manifest.json"))
        assert [a["filename"] for a in manifest["requests"][0]["attachments"]] == [names[given]]


def test_a_file_kept_under_another_extension_goes_out_under_its_types(client, auth, users):
    batch_id = batch_with_fields(user=users["staff"], now=utcnow(), recipients=1)
    (request_id,) = request_ids(batch_id)
    fill(request_id, now=utcnow(), scan=a_png(), filename="scan.exe")  # as one was kept before names were checked
    auth.login()
    got = client.get(f"/batches/{batch_id}/requests/{request_id}/attachments/id_scan")
    assert got.headers["Content-Disposition"] == 'attachment; filename="scan.png"'
    assert "scan.exe" not in client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)


def test_a_pdfs_active_content_is_taken_out_and_the_file_as_given_keeps_its_hash(
    app, client, auth, users, run_jobs, tmp_path
):
    hostile = hostile_form()
    assert active_content(hostile)
    r, other = contract(users), contract(users)
    answer = post(client, r.token, GOOD, {"field-id_scan": ("contract.pdf", hostile)})
    assert answer.status_code == 303, answer.get_data(as_text=True)[:2000]
    value = saved(r.id)["id_scan"]
    kept = get_storage().get(value.storage_key)
    assert active_content(kept) == set()
    assert value.sha256 == hashlib.sha256(kept).hexdigest() and value.size == len(kept)
    assert value.original_sha256 == hashlib.sha256(hostile).hexdigest()
    hashes = (value.sha256, value.original_sha256)
    # A plain PDF is kept byte for byte.
    plain = plain_pdf()
    assert post(client, other.token, GOOD, {"field-id_scan": ("scan.pdf", plain)}).status_code == 303
    plain_value = saved(other.id)["id_scan"]
    assert get_storage().get(plain_value.storage_key) == plain and plain_value.original_sha256 is None
    # Staff get the cleaned file.
    auth.login()
    assert client.get(f"/batches/{r.batch_id}/requests/{r.id}/attachments/id_scan").data == kept
    # The audit certificate gives both hashes.
    run_jobs("pdf", "mail")
    sealed = tmp_path / "sealed.pdf"
    sealed.write_bytes(get_storage().get(signed_document(r.id).storage_key))
    text = "".join(subprocess.run(["pdftotext", str(sealed), "-"], capture_output=True, text=True).stdout.split())
    assert f"sha256{hashes[0]}" in text and f"Activecontenttakenout;asgiven:sha256{hashes[1]}" in text


def test_bidirectional_controls_are_taken_out_of_values_as_out_of_names(client, auth, users):
    # An IBAN whose groups a right-to-left override and isolates would show in another order on the staff panel.
    iban = "\u202eDE89 3704\u202c 0044 \u20660532\u2069 0130\u200f 00\u061c"
    fields = [{**f, "read_only": True} if f["name"] == "note" else f for f in FIELDS]
    r = make_sent_request(
        now=utcnow() - timedelta(minutes=5),
        owner=users["staff"],
        html=CONTRACT,
        fields=fields,
        data={"field_note": "\u2067Note\u2069 from\u200e HR"},
    )
    answer = post(client, r.token, {**GOOD, "field-iban": iban}, {"field-id_scan": ("scan.png", a_png())})
    assert answer.status_code == 303
    values = saved(r.id)
    assert values["iban"].value == "DE89 3704 0044 0532 0130 00"
    assert values["note"].value == "Note from HR"
    auth.login()
    panel = client.get(f"/batches/{r.batch_id}/requests/{r.id}").get_data(as_text=True)
    assert "DE89 3704 0044 0532 0130 00" in panel
    assert not re.search("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]", panel)
