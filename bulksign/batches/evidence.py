"""One evidence package per batch: signed PDFs, certificates, attachments, a manifest of every request and a
SHA256SUMS, built as an export one document at a time. docs/architecture/batches.md lists what it holds."""

from __future__ import annotations

import gc
import hashlib
import io
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO, cast

from flask import current_app
from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from bulksign.batches import exports
from bulksign.batches.field_values import StoredValue, stored_values
from bulksign.core.spreadsheets import csv_writer
from bulksign.doc_templates.template_parties import party_labels
from bulksign.documents.audit_certificate import certificate_pages
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.storage import Storage
from bulksign.models import Batch, Document, Export, SealCertificate, SigningRequest, User
from bulksign.signing.parties import parties_by_request

logger = logging.getLogger(__name__)

EVIDENCE = "evidence"
MANIFEST_COLUMNS = (
    "request_id",
    "row",
    "parties",
    "status",
    "created_at",
    "sent_at",
    "opened_at",
    "signed_at",
    "declined_at",
    "expires_at",
    "purged_at",
    "original_sha256",
    "signed_sha256",
    "seal_certificate_sha256",
    "seal_certificate_subject",
    "timestamp",
    "signed_file",
    "certificate_file",
    "attachments",
)
#: Requests read per page for the manifest.
PAGE = 500
#: Cut-out certificates leave pypdf's reader and writer in reference cycles (~30 KB a document) that the collector
#: frees late: collected every this many documents, the peak stays flat (4.8 MiB for 100 documents, 5.8 for 600).
COLLECT_EVERY = 50


def _iso(at: datetime | None) -> str | None:
    return at.isoformat(timespec="seconds") if at else None


def manifest_parties(
    session: Session, requests: Sequence[Row[Any]], *, labels: Mapping[str, str]
) -> dict[int, list[dict[str, Any]]]:
    """Every party of each request (``parties.parties_by_request``) as the manifest lists it: its role, the role
    as people read it (``labels``), who (none of a purged request), its own state, and when it signed or declined."""
    return {
        request_id: [
            {
                "role": p.role,
                "label": labels.get(p.role, p.role),
                "name": p.name,
                "email": p.email,
                "status": p.status,
                "signed_at": _iso(p.signed_at),
                "declined_at": _iso(p.declined_at),
            }
            for p in shown
        ]
        for request_id, shown in parties_by_request(session, requests).items()
    }


def start_evidence(session: Session, *, batch_id: int, user: User, now: datetime) -> exports.ExportStarted:
    """Create the export row of the batch's evidence package (the caller commits, then enqueues the build)."""
    return exports.start_export(session, batch_id=batch_id, user=user, now=now, kind=EVIDENCE)


def build_evidence(
    session: Session, *, export_id: int, storage: Storage, now: Callable[[], datetime], progress_every: int = 50
) -> exports.ExportResult:
    """Write the batch's evidence package to storage (``exports.build_zip``), committing progress as it goes."""
    return exports.build_zip(
        session,
        export_id=export_id,
        storage=storage,
        now=now,
        write=_write_package,
        name=EVIDENCE,
        progress_every=progress_every,
        # The manifest and the README compress well; the PDFs are compressed already and stored as they are.
        compression=zipfile.ZIP_DEFLATED,
    )


exports.BUILDERS[EVIDENCE] = build_evidence


#: What the manifest reads of a request: plain rows, so the progress commits expire nothing that is read again.
_REQUEST_COLUMNS = (
    SigningRequest.id,
    SigningRequest.row_number,
    SigningRequest.email,
    SigningRequest.name,
    SigningRequest.status,
    SigningRequest.created_at,
    SigningRequest.sent_at,
    SigningRequest.opened_at,
    SigningRequest.signed_at,
    SigningRequest.declined_at,
    SigningRequest.expires_at,
    SigningRequest.purged_at,
)
_DOCUMENT_COLUMNS = (
    Document.request_id,
    Document.kind,
    Document.storage_key,
    Document.sha256,
    Document.seal_fingerprint,
    Document.signature_box,
)


def _requests(session: Session, *, batch_id: int) -> Iterator[Sequence[Row[Any]]]:
    after = 0
    for _ in range(1_000_000):  # bounded: pages of PAGE requests
        page = session.execute(
            select(*_REQUEST_COLUMNS)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.id > after)
            .order_by(SigningRequest.id)
            .limit(PAGE)
        ).all()
        if not page:
            return
        after = page[-1].id
        yield page


def _documents(session: Session, request_ids: list[int]) -> dict[tuple[int, str], Row[Any]]:
    """The newest original and signed document of each request."""
    found: dict[tuple[int, str], Row[Any]] = {}
    for doc in session.execute(
        select(*_DOCUMENT_COLUMNS)
        .where(Document.request_id.in_(request_ids), Document.kind.in_(["original", "signed"]))
        .order_by(Document.id)
    ):
        found[(doc.request_id, doc.kind)] = doc
    return found


def timestamp_of(signed: bytes) -> str | None:
    """When the seal's time-stamp token says it was made (RFC 3161 genTime, ISO 8601), or None without one."""
    from pyhanko.pdf_utils.reader import PdfFileReader

    try:
        signatures = PdfFileReader(io.BytesIO(signed)).embedded_signatures
        token = signatures[-1].attached_timestamp_data if signatures else None
        if token is None:
            return None
        gen_time = token["encap_content_info"]["content"].parsed["gen_time"].native
        return cast(str, gen_time.isoformat(timespec="seconds"))
    except Exception:  # noqa: BLE001 - an unreadable token is reported as absent, the PDF itself is still checked
        logger.debug("no readable time-stamp", exc_info=True)
        return None


class _Sums:
    """SHA256SUMS as files are added: ``<hex>  <path>`` lines, the format ``sha256sum -c`` reads."""

    def __init__(self, fh: TextIO) -> None:
        self.fh = fh

    def add(self, archive: zipfile.ZipFile, name: str, data: bytes, *, sha256: str | None = None) -> str:
        digest = sha256 or hashlib.sha256(data).hexdigest()
        archive.writestr(name, data, compress_type=zipfile.ZIP_STORED if name.endswith(".pdf") else None)
        self.fh.write(f"{digest}  {name}\n")
        return digest


def _write_package(
    session: Session, archive: zipfile.ZipFile, export: Export, storage: Storage, tick: Callable[[int], None]
) -> int:
    batch = session.get_one(Batch, export.batch_id)
    batch_id, batch_name = batch.id, batch.name
    labels = party_labels(batch.template_version, language=batch.language or "en")
    certificates: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory(prefix="bulksign-evidence-") as folder:
        paths = {name: os.path.join(folder, name) for name in ("manifest.csv", "manifest.json", "SHA256SUMS")}
        with (
            open(paths["manifest.csv"], "w", newline="", encoding="utf-8") as csv_fh,
            open(paths["manifest.json"], "w", encoding="utf-8") as json_fh,
            open(paths["SHA256SUMS"], "w", encoding="utf-8") as sums_fh,
        ):
            sums = _Sums(sums_fh)
            writer = csv_writer(csv_fh)
            writer.writerow(MANIFEST_COLUMNS)
            json_fh.write(json.dumps({"batch": {"id": batch_id, "name": batch_name}, "requests": []})[:-2])
            archive.writestr(zipfile.ZipInfo("attachments/"), b"")  # the signers' attachments' place, even if none
            files, first = 0, True
            for page in _requests(session, batch_id=batch_id):
                docs = _documents(session, [r.id for r in page])
                parties = manifest_parties(session, page, labels=labels)
                values = stored_values(session, request_ids=[r.id for r in page])
                for r in page:
                    entry = _entry(session, archive, sums, r, docs, storage, certificates)
                    entry.update(_given(archive, sums, r, values.get(r.id, {}), storage))
                    entry["parties"] = parties[r.id]
                    writer.writerow(_csv_cells(entry))
                    json_fh.write(("" if first else ",") + json.dumps(entry, ensure_ascii=False))
                    first = False
                    if entry["signed_file"]:
                        files += 1
                        tick(files)
                        if files % COLLECT_EVERY == 0:
                            gc.collect()
            json_fh.write("]}\n")
            readme = _readme(batch_id, batch_name, app_url=current_app.config["APP_URL"]).encode()
            sums.add(archive, "README.txt", readme)
        for name in ("manifest.csv", "manifest.json"):
            with open(paths[name], "rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            archive.write(paths[name], name)
            with open(paths["SHA256SUMS"], "a", encoding="utf-8") as sums_fh:
                sums_fh.write(f"{digest}  {name}\n")
        archive.write(paths["SHA256SUMS"], "SHA256SUMS")
    return files


def _entry(
    session: Session,
    archive: zipfile.ZipFile,
    sums: _Sums,
    r: Row[Any],
    docs: Mapping[tuple[int, str], Row[Any]],
    storage: Storage,
    certificates: dict[str, str | None],
) -> dict[str, Any]:
    """One request's manifest entry (``r``: a row of ``_REQUEST_COLUMNS``); its signed PDF and certificate go in."""
    original, signed = docs.get((r.id, "original")), docs.get((r.id, "signed"))
    entry = {
        "request_id": r.id,
        "row": r.row_number,
        "status": r.status,
        **{
            k: (getattr(r, k).isoformat(timespec="seconds") if getattr(r, k) else None)
            for k in ("created_at", "sent_at", "opened_at", "signed_at", "declined_at", "expires_at", "purged_at")
        },
        "original_sha256": original.sha256 if original else None,
        "signed_sha256": None,
        "seal_certificate_sha256": None,
        "seal_certificate_subject": None,
        "timestamp": None,
        "signed_file": None,
        "certificate_file": None,
    }
    if signed is None or r.purged_at is not None:
        # A purged request (retention or erasure) is listed with its hashes; its files are gone from storage.
        entry["signed_sha256"] = signed.sha256 if signed is not None else None
        entry["seal_certificate_sha256"] = signed.seal_fingerprint if signed is not None else None
        return entry
    stem = exports.zip_name(r.row_number, r.id, r.email)[: -len(".pdf")]
    data = storage.get(signed.storage_key)
    entry["signed_file"] = f"signed/{stem}.pdf"
    entry["signed_sha256"] = sums.add(archive, entry["signed_file"], data)
    if original is not None:
        pages = certificate_pages(
            data, original=storage.get(original.storage_key), box=SignatureBox.from_json(original.signature_box)
        )
        entry["certificate_file"] = f"certificates/{stem}-audit.pdf"
        sums.add(archive, entry["certificate_file"], pages)
    fingerprint = signed.seal_fingerprint
    if fingerprint:
        if fingerprint not in certificates:
            certificates[fingerprint] = session.scalar(
                select(SealCertificate.subject).where(SealCertificate.fingerprint == fingerprint)
            )
        entry["seal_certificate_sha256"] = fingerprint
        entry["seal_certificate_subject"] = certificates[fingerprint]
    entry["timestamp"] = timestamp_of(data)
    return entry


def _given(
    archive: zipfile.ZipFile, sums: _Sums, r: Row[Any], values: Mapping[str, StoredValue], storage: Storage
) -> dict[str, Any]:
    """What a request's signers filled in: ``fields`` (the values as stored) and ``attachments`` (each with its
    sha256, its file in ``attachments/`` while the request is not purged; a purged one keeps its hash only)."""
    signed_name = exports.zip_name(r.row_number, r.id, r.email)
    attachments = []
    for row in values.values():
        if row.sha256 is None:
            continue
        file = None
        if row.storage_key is not None and r.purged_at is None:
            beside = exports.attachment_zip_name(signed_name, field=row.name, filename=row.value or row.name)
            file = f"attachments/{beside}"
            sums.add(archive, file, storage.get(row.storage_key))
        attachments.append(
            {
                "field": row.name,
                "role": row.role,
                "filename": row.value,
                "content_type": row.content_type,
                "size": row.size,
                "sha256": row.sha256,
                # The file as the signer gave it, when its active content was taken out before it was kept.
                "original_sha256": row.original_sha256,
                "entered_at": row.entered_at.isoformat(timespec="seconds"),
                "file": file,
            }
        )
    return {
        "fields": {row.name: row.value for row in values.values() if row.sha256 is None},
        "attachments": attachments,
    }


def _csv_cells(entry: dict[str, Any]) -> list[object]:
    cells = dict(entry)
    cells["attachments"] = "; ".join(f"{a['field']}: {a['file'] or '-'} ({a['sha256']})" for a in entry["attachments"])
    cells["parties"] = "; ".join(map(_party_cell, entry["parties"]))
    return [cells[c] for c in MANIFEST_COLUMNS]


def _party_cell(party: dict[str, Any]) -> str:
    """``employer: Anna Boss <hr@example.com> (signed 2026-01-05T10:00:00+00:00)``; a purged request's parties
    by role and state only."""
    who = " ".join(filter(None, (party["name"], f"<{party['email']}>" if party["email"] else None)))
    when = party["signed_at"] or party["declined_at"]
    return f"{party['role']}: {who + ' ' if who else ''}({party['status']}{' ' + when if when else ''})"


def _readme(batch_id: int, batch_name: str, *, app_url: str) -> str:
    return f"""Evidence package of the batch "{batch_name}" (id {batch_id}), made by Bulksign.

What is in it
- signed/        every signed PDF, sealed (PAdES) as the recipient received it.
- certificates/  the audit certificate of each signed PDF on its own: who signed, when, from where, every event.
                 A copy for filing: the seal covers the signed PDF, whose last pages these are.
- attachments/   the signers' attachments (an ID scan, a certificate ...), named after the signed PDF of their
                 request and their field, with the extension of the type their content was found to be. A PDF is
                 kept without active content (scripts, actions, embedded files); the manifest.json then gives
                 the sha256 of the file as the signer gave it too (original_sha256).
- manifest.csv, manifest.json
                 every request of the batch: each of its parties (role, name, address, the party's own
                 status, when it signed or declined), the request's status and times, the sha256 of the original and of
                 the signed PDF, the seal certificate's sha256 fingerprint and subject, and the time-stamp when
                 the seal carries one, each attachment with its sha256 (manifest.json: also the values
                 the signers filled in). A request whose documents were purged (purged_at) keeps its
                 hashes and has no files here.
- SHA256SUMS     the sha256 of every other file here.

How to check it
1. The files are the ones listed:      sha256sum -c SHA256SUMS
2. A signed PDF is intact and sealed:  pdfsig signed/<file>.pdf
   (poppler-utils; "Signature Validation: Signature is Valid." and the seal certificate's subject.)
3. Bulksign issued it:                 open {app_url}/verify and drop the PDF there, or give its sha256
   (from the manifest); it answers who signed it and when, and which certificate sealed it.
4. The seal certificate: its sha256 fingerprint in the manifest is the one pdfsig shows
   (pdfsig -dump writes the certificate out; sha256sum it).
"""
