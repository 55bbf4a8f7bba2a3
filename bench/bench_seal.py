"""PAdES sealing: seals per second with the key parsed once per process, against pyHanko's plain SimpleSigner.

``SimpleSigner`` parses the private key for every raw signature (twice per seal): ~105 ms per
RSA-2048 seal instead of ~30 ms (field notes). Baseline: the same seals, same file, same run,
with the plain signer. Also: building the signed PDF (stamp + audit page) and validating a seal.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from datetime import UTC, datetime

from bench import Figure

#: The cached key must make sealing at least this much faster than the plain signer, same run (notes: 105/30 ≈ 3.5).
TARGET_SPEEDUP = 2.5


def _timed(count: int, func) -> float:
    """Seconds per call over ``count`` calls."""
    started = time.perf_counter()
    for _ in range(count):
        func()
    return (time.perf_counter() - started) / count


def _interleaved(count: int, first, second) -> tuple[float, float]:
    """Seconds per call of each, alternating calls so that a busy machine slows both alike."""
    spent = [0.0, 0.0]
    for _ in range(count):
        for i, func in enumerate((first, second)):
            started = time.perf_counter()
            func()
            spent[i] += time.perf_counter() - started
    return spent[0] / count, spent[1] / count


def run(*, small: bool) -> list[Figure]:
    from bulksign.documents import audit_record, seal_keys, sealing, signed_pdf
    from bulksign.documents.pdf import render_pdf

    count = 10 if small else 100
    now = datetime.now(UTC)
    original = render_pdf(
        '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">'
        + "<p>Договор — contract text, paragraph after paragraph.</p>" * 60
        + "</body>"
    )
    record = audit_record.AuditRecord(
        document_name="Employment contract",
        batch_id=1,
        request_id=1,
        recipient_name="Иван Петров",
        recipient_email="ivan@example.com",
        signer_name="Иван Петров",
        signer_ip="203.0.113.5",
        signed_at=now,
        original_sha256=hashlib.sha256(original).hexdigest(),
        lines=tuple(
            audit_record.AuditLine(now, label, "203.0.113.5", "Mozilla/5.0 (iPhone) Safari")
            for label in ("Created", "Sent", "Email opened", "Page opened", "Signed")
        ),
    )
    with tempfile.TemporaryDirectory(prefix="bulksign-bench-seal-") as folder:
        cached = seal_keys.seal_key({"VAR_DIR": folder})
        plain = seal_keys.load_seal_key(
            pkcs12_bytes=seal_keys._self_signed_path(folder).read_bytes(),
            password=None,
            path="bench",
            self_signed=True,
            cache_key_material=False,
        )
        signed_pdf.build_signed_pdf(original, record, image_png=None)  # fonts registered outside the timing
        build = _timed(count, lambda: signed_pdf.build_signed_pdf(original, record, image_png=None))
        document = signed_pdf.build_signed_pdf(original, record, image_png=None)
        sealing.apply_seal(document, cached)  # warm-up: imports, first-use caches
        fast, slow = _interleaved(
            count, lambda: sealing.apply_seal(document, cached), lambda: sealing.apply_seal(document, plain)
        )
        sealed = sealing.apply_seal(document, cached)
        validate = _timed(count, lambda: sealing.check_seal(sealed, cached))
        assert sealing.check_seal(sealed, cached).valid

    speedup = slow / fast
    return [
        Figure(
            "seals per second, key cached",
            1 / fast,
            "seals/s",
            target=f">= {TARGET_SPEEDUP:g} × baseline",
            ok=speedup >= TARGET_SPEEDUP,
            ratio=speedup,
            baseline="plain SimpleSigner (key parsed per signature)",
        ),
        Figure("seals per second, plain SimpleSigner", 1 / slow, "seals/s"),
        Figure("one seal, key cached", fast * 1000, "ms"),
        Figure("validate a seal (pyHanko)", validate * 1000, "ms"),
        Figure("build signed PDF (stamp + audit page)", build * 1000, "ms"),
    ]
