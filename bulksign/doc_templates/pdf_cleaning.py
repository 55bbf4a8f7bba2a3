"""Active content out of PDF templates: nothing a template carries may run, open or send anything in the copies
recipients get, nor sit in them under our seal.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from pypdf import PdfReader
from pypdf.generic import ArrayObject, BooleanObject, ByteStringObject, DictionaryObject, IndirectObject, PdfObject

from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError

#: Deepest nesting of arrays and dictionaries inside one object a template may have. Real files stay under 20;
#: deeper ones are made to exhaust Python's stack (pypdf gives up at a few hundred levels by a RecursionError).
MAX_NESTING = 100

#: What staff are told was taken out of their PDF, in this order.
JAVASCRIPT = N_("JavaScript")
LAUNCH = N_("launch actions (programs to start)")
NOT_HTTPS = N_("links that are not https")
OTHER_FILES = N_("links to other files")
FORM_SUBMISSION = N_("form submission and data import")
OTHER_ACTIONS = N_("other actions")
EMBEDDED_FILES = N_("embedded files")
FILE_ATTACHMENTS = N_("file attachments")
MEDIA = N_("media and 3D content")
XFA = N_("XFA form data")
REMOVED = (
    JAVASCRIPT,
    LAUNCH,
    NOT_HTTPS,
    OTHER_FILES,
    FORM_SUBMISSION,
    OTHER_ACTIONS,
    EMBEDDED_FILES,
    FILE_ATTACHMENTS,
    MEDIA,
    XFA,
)

#: Every action type of PDF 2.0 (ISO 32000-2, 12.6.4.1): a dictionary whose ``/S`` is one of these is an action.
_ACTION_TYPES = frozenset(
    {
        "/GoTo",
        "/GoToR",
        "/GoToE",
        "/GoToDp",
        "/Launch",
        "/Thread",
        "/URI",
        "/Sound",
        "/Movie",
        "/Hide",
        "/Named",
        "/SubmitForm",
        "/ResetForm",
        "/ImportData",
        "/SetOCGState",
        "/Rendition",
        "/Trans",
        "/GoTo3DView",
        "/JavaScript",
        "/RichMediaExecute",
    }
)
#: How a removed action is named to staff, by its type; any other is one of OTHER_ACTIONS.
_ACTION_LABELS = {
    "/JavaScript": JAVASCRIPT,
    "/Launch": LAUNCH,
    "/URI": NOT_HTTPS,
    "/GoToR": OTHER_FILES,
    "/GoToE": OTHER_FILES,
    "/GoToDp": OTHER_FILES,
    "/SubmitForm": FORM_SUBMISSION,
    "/ImportData": FORM_SUBMISSION,
    "/Sound": MEDIA,
    "/Movie": MEDIA,
    "/Rendition": MEDIA,
    "/RichMediaExecute": MEDIA,
    "/GoTo3DView": MEDIA,
}
#: Annotations that are nothing but a file or media to open: taken off their pages.
_DROPPED_ANNOTATIONS = {
    "/FileAttachment": FILE_ATTACHMENTS,
    "/RichMedia": MEDIA,
    "/3D": MEDIA,
    "/Movie": MEDIA,
    "/Sound": MEDIA,
    "/Screen": MEDIA,
}
#: What a dropped annotation keeps where something else still points at it (a popup's /Parent): an inert shell.
_SHELL_KEYS = frozenset({"/Type", "/Subtype", "/Rect"})
#: Keys whose value is a file's content or a list of files (file specifications' /EF and /RF, associated files).
_FILE_KEYS = ("/EF", "/RF", "/AF")

_XFA_REFUSED = N_(
    "The PDF is an XFA form (made with Adobe LiveCycle or AEM Forms), which is not supported. Save it "
    "as a standard (AcroForm) PDF form, or print it to a plain PDF and place the fields here."
)


@dataclass(frozen=True)
class Cleaned:
    """A PDF template as it is kept: ``data`` without active content; ``removed`` names what was taken out."""

    data: bytes
    #: Labels from ``REMOVED``, in that order; empty when the file had nothing to take out (``data`` is the upload).
    removed: tuple[N_, ...] = ()


def strip_active_content(reader: PdfReader) -> tuple[N_, ...]:
    """Take the active content out of the objects of ``reader`` (a pypdf ``PdfReader``) in place, so that a writer
    cloned from it has none; what was taken out (``REMOVED``'s labels). TemplateError for a dynamic XFA form, which
    has nothing left without its XFA, and for a file nested deeper than ``MAX_NESTING``."""

    found: set[N_] = set()
    _clean_catalog(reader.root_object, found)
    stack = [(reader.trailer.raw_get(key), 0) for key in ("/Root", "/Info") if key in reader.trailer]
    seen: set[tuple[int, int]] = set()
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, IndirectObject):
            if (obj.idnum, obj.generation) in seen:
                continue
            seen.add((obj.idnum, obj.generation))
            obj, depth = obj.get_object(), 0
        if depth > MAX_NESTING:
            raise nested_too_deeply()
        if isinstance(obj, DictionaryObject):
            _clean_dictionary(obj, found)
            # dict's own values: the raw entries, references unresolved (pypdf resolves them in ``d[key]``).
            stack.extend((value, depth + 1) for value in dict.values(obj))
        elif isinstance(obj, ArrayObject):
            stack.extend((value, depth + 1) for value in list.__iter__(obj))
    return tuple(label for label in REMOVED if label in found)


def nested_too_deeply() -> TemplateError:
    return TemplateError(
        N_(
            "The PDF is nested more than %(limit)d levels deep, which no real document is. Open it "
            "in a PDF viewer and print it as a new PDF.",
            limit=MAX_NESTING,
        )
    )


def _clean_catalog(root: DictionaryObject, found: set[N_]) -> None:
    """What only the catalog holds: the names trees of document JavaScript and embedded files, a portfolio's view
    of its files, the XFA packet of a form that has its AcroForm fields as well."""

    names = _value(root, "/Names")
    if isinstance(names, DictionaryObject):
        for key, label in (("/JavaScript", JAVASCRIPT), ("/EmbeddedFiles", EMBEDDED_FILES)):
            if key in names:
                del names[key]
                found.add(label)
    if "/Collection" in root:  # a portfolio: its pages are a cover, its documents the embedded files
        del root["/Collection"]
        found.add(EMBEDDED_FILES)
    form = _value(root, "/AcroForm")
    if isinstance(form, DictionaryObject) and "/XFA" in form:
        # A dynamic XFA form's pages are only a "please wait" placeholder, its fields only in the XFA; a static
        # or hybrid one shows and fills its AcroForm fields as well, which is all a template uses.
        if _value(root, "/NeedsRendering") == BooleanObject(True) or not _value(form, "/Fields"):
            raise TemplateError(_XFA_REFUSED)
        del form["/XFA"]
        if "/NeedsRendering" in root:
            del root["/NeedsRendering"]
        found.add(XFA)


def _clean_dictionary(d: DictionaryObject, found: set[N_]) -> None:
    """One dictionary of the graph: its event actions, active actions, files and dropped annotations out."""

    if _is_action(d) and not _harmless(d):
        # Reached by a key no viewer runs actions from (a names tree, a private key): inert, and still reported.
        _report_actions(d, found)
        d.clear()
        return
    if "/AA" in d:  # actions on events: opening, closing, a page shown, a key typed in a field ...
        events = _value(d, "/AA")
        for action in dict.values(events) if isinstance(events, DictionaryObject) else ():
            _report_actions(action.get_object(), found)
        del d["/AA"]
    if "/JS" in d:
        del d["/JS"]
        found.add(JAVASCRIPT)
    for key in _FILE_KEYS:
        if key in d:
            del d[key]
            found.add(EMBEDDED_FILES)
    if _name(d, "/Subtype") in _DROPPED_ANNOTATIONS and _name(d, "/Type", "/Annot") == "/Annot":
        for key in [k for k in d if k not in _SHELL_KEYS]:
            del d[key]
    annotations = _value(d, "/Annots")
    if isinstance(annotations, ArrayObject):
        kept = []
        for annotation in annotations:
            resolved = annotation.get_object()
            subtype = _name(resolved, "/Subtype") if isinstance(resolved, DictionaryObject) else None
            if subtype in _DROPPED_ANNOTATIONS:
                found.add(_DROPPED_ANNOTATIONS[subtype])
            else:
                kept.append(annotation)
        annotations[:] = kept  # in place: an /Annots array may be shared by pages
    for key in list(d):
        value = d[key]
        if _is_action(value) and not _harmless(value):  # /A of a link or widget, /OpenAction, /Next ...
            _report_actions(value, found)
            del d[key]


def _value(d: DictionaryObject, key: str, default: str | None = None) -> PdfObject | str | None:
    """``d[key]`` resolved: pypdf's ``get`` leaves a reference unresolved, and any value may be one (an indirect
    ``/S`` still names the action to a viewer)."""
    return d[key] if key in d else default


def _name(d: DictionaryObject, key: str, default: str | None = None) -> str | None:
    """``d[key]`` when it is a name (``/Subtype``, ``/S``), else None: a hostile file may put an array there."""
    value = _value(d, key, default)
    return value if isinstance(value, str) else None


def _is_action(obj: object) -> TypeGuard[DictionaryObject]:
    # Transition dictionaries (/Type /Trans) and structure elements (/Type /StructElem) have an /S of their own.
    return (
        isinstance(obj, DictionaryObject)
        and _name(obj, "/S") in _ACTION_TYPES
        and _name(obj, "/Type", "/Action") == "/Action"
    )


def _harmless(action: DictionaryObject) -> bool:
    """A link to an https address, or a move to a place in the document itself (what a ``/Dest`` does), with
    nothing chained after it: nothing runs, opens another file or sends anything."""
    if _value(action, "/Next") is not None or "/JS" in action:
        return False
    if _name(action, "/S") == "/GoTo":
        return "/D" in action
    return _https(action)


def _https(action: DictionaryObject) -> bool:
    """A URI action to an https address."""

    if _name(action, "/S") != "/URI":
        return False
    uri = _value(action, "/URI")
    text = bytes(uri).decode("latin-1") if isinstance(uri, ByteStringObject) else str(uri or "")
    return text[:8].lower() == "https://"


def _report_actions(action: object, found: set[N_]) -> None:
    """Name ``action`` and every action chained after it (``/Next``: one, or an array; chains may loop)."""

    chain: list[object] = [action]
    seen: set[int] = set()
    while chain:
        action = chain.pop()
        if not _is_action(action) or id(action) in seen:
            continue
        seen.add(id(action))
        if not _https(action):  # an https link goes for what is chained after it, named on its own
            found.add(_ACTION_LABELS.get(_name(action, "/S") or "", OTHER_ACTIONS))
        if "/JS" in action:
            found.add(JAVASCRIPT)
        following = _value(action, "/Next")
        if isinstance(following, ArrayObject):
            chain.extend(n.get_object() for n in following)
        else:
            chain.append(following)
