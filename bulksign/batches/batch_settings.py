"""A new batch's settings from its form or API fields, checked once: its options, its own retention periods, and
who signs a template's other roles. ``create_batch`` takes what these return."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bulksign.batches.notices import NoticeAddressError, chosen_notice_address
from bulksign.batches.retention.periods import MAX_DAYS as MAX_KEEP_DAYS
from bulksign.core.config import LANGUAGES, time_zones
from bulksign.core.errors import BulksignError, Message
from bulksign.core.messages import N_
from bulksign.core.schemas import ABSENT, MAX_ID, Text, no_null_defaults
from bulksign.doc_templates.errors import FieldSettingsError
from bulksign.doc_templates.field_conditions import check_conditions
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.roles import template_roles
from bulksign.doc_templates.template_check import TemplateNotReady, require_ready
from bulksign.doc_templates.template_parties import PartySource, template_parties, template_routing
from bulksign.mail.email_checks import check_email
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import TemplateVersion
from bulksign.models.batches import Reach
from bulksign.models.parties import RECIPIENT_ROLE
from bulksign.recipients.parties import PartyError, PartyPerson, fixed_parties
from bulksign.recipients.phones import region_for
from bulksign.recipients.row_checks import PhoneRule
from bulksign.signing import parties

MAX_REMINDERS = 5
MAX_DEADLINE_DAYS = 365
MAX_TEXT_CAP = 1_000_000

# Literals of computed values: mypy sees the plain type, pydantic (and the API's description) the values.
if TYPE_CHECKING:
    Language = str
else:
    Language = Literal[LANGUAGES]


class BatchError(BulksignError):
    """A setting or the rows cannot make a batch; ``field`` names the form field when there is one."""

    status = 422

    def __init__(self, message: Message, field: str | None = None):
        super().__init__(message, field=field)


@dataclass(frozen=True)
class BatchSettings:
    name: str
    deadline_days: int = 7
    reminder_days: tuple[int, ...] = (2, 4)
    max_reminders: int = 3
    reply_to: str | None = None
    language: str = "en"
    quiet_hours_start: int | None = None
    quiet_hours_end: int | None = None
    timezone: str = "UTC"
    #: Who gets the expiry summary, decline notices and the completion notice (a team manager or any
    #: address); None: the owner.
    notify_email: str | None = None
    #: The team the batch belongs to; None: the template's team if the user is in it, else the user's first.
    team_id: int | None = None
    #: Recipients confirm a one-time code (SMS when the row has a phone, else mail) before they can sign.
    one_time_code: bool = False
    #: The batch's own retention periods (``retention.periods``); None: its team's.
    keep_signed_days: int | None = None
    keep_unsigned_days: int | None = None
    #: How recipients are reached (mail, or text messages too) and at most how many texts the batch sends; None:
    #: one per row with a phone and reminder (``texts_allowed``).
    reach: Reach = Reach.MAIL
    text_cap: int | None = None

    def texts_allowed(self, *, phone_rows: int) -> int:
        """At most this many texts for a batch with ``phone_rows`` rows with a phone: staff's cap, else an
        invitation and each reminder per such row; none for a batch that only mails."""
        if self.reach is Reach.MAIL:
            return 0
        return self.text_cap if self.text_cap is not None else phone_rows * (1 + self.max_reminders)


def _unknown_reach() -> BatchError:
    return BatchError(
        N_("“Reach recipients by” must be one of %(known)s.", known=", ".join(r.value for r in Reach)), "channel"
    )


def reach_from(raw: str) -> Reach:
    """The batch's ``channel`` field as a ``Reach`` (blank: mail only); BatchError naming the field otherwise."""
    try:
        return Reach(raw.strip() or Reach.MAIL.value)
    except ValueError:
        raise _unknown_reach() from None


#: The number fields: their label in messages, and their bounds.
_NUMBERS: dict[str, tuple[N_, int, int]] = {
    "deadline_days": (N_("Deadline (days)"), 1, MAX_DEADLINE_DAYS),
    "max_reminders": (N_("Maximum reminders"), 0, MAX_REMINDERS),
    "team_id": (N_("Team"), 1, MAX_ID),
    "quiet_hours_start": (N_("Quiet hours start"), 0, 23),
    "quiet_hours_end": (N_("Quiet hours end"), 0, 23),
    "keep_signed_days": (N_("Keep signed documents"), 1, MAX_KEEP_DAYS),
    "keep_unsigned_days": (N_("Keep unsigned requests"), 1, MAX_KEEP_DAYS),
    "text_cap": (N_("Most text messages"), 0, MAX_TEXT_CAP),
}
_TEXTS: dict[str, N_] = {
    "name": N_("Batch name"),
    "reply_to": N_("Reply-to address"),
    "notify_to": N_("Notices to"),
    "notify_email": N_("Notices to"),
    "timezone": N_("Time zone"),
}


def _number(field: str, description: str) -> Any:
    """A number field of the form, with its bounds from ``_NUMBERS``; left out: None (the default)."""
    _, low, high = _NUMBERS[field]
    return Field(ABSENT, ge=low, le=high, description=description)


class ReachFields(BaseModel):
    """How recipients are reached and in which language: what the file's check needs besides the file (a row may
    have a phone and no address only in a batch that texts, its national number read in the language's region)."""

    model_config = ConfigDict(frozen=True, str_strip_whitespace=True, json_schema_extra=no_null_defaults)
    language: Language = Field(ABSENT, description="The recipients' language (default `en`).")
    channel: Reach = Field(
        ABSENT,
        description="How recipients are reached: `mail` (the default), `text_without_address` (a row with a `phone` "
        "and no `email` is invited and reminded by text), `text_on_bounce` (a bounced invitation or reminder goes "
        "again by text to the row's phone) or `text_both`. Phones are checked and written in E.164; national ones "
        "are read in the `PHONE_REGION` setting's region, else the `language`'s (`ru`: Russia).",
    )


class BatchSettingsForm(ReachFields):
    """A new batch's settings as the web form and the API send them (left out or blank: the default): each field's
    type, bounds and meaning, once. ``settings_from_form`` checks a form through it; the API's batch form extends
    it, so its OpenAPI document shows the same."""

    model_config = ConfigDict(frozen=True, str_strip_whitespace=True, json_schema_extra=no_null_defaults)
    name: Text = Field(ABSENT, max_length=200, description="Default: the template's name and today's date.")
    deadline_days: int = _number("deadline_days", "Days to sign (default 7).")
    reminder_days: str = Field(
        ABSENT,
        pattern=r"^[0-9, ;]{0,100}$",
        description="Days after the invitation to remind, e.g. `2,4` (the default); each before the deadline.",
    )
    max_reminders: int = _number("max_reminders", "Default: one for each reminder day; 0: none.")
    reply_to: Text = Field(ABSENT, max_length=254)
    notify_to: Text = Field(
        ABSENT,
        max_length=254,
        description="Who gets the expiry summary, decline and completion notices: `owner` (the "
        "default), a manager's address, or `other` with `notify_email`.",
    )
    notify_email: Text = Field(
        ABSENT, max_length=254, description="The address of the notices (with `notify_to=other`, or alone)."
    )
    team_id: int = _number("team_id", "Default: the template's team.")
    quiet_hours_start: int = _number("quiet_hours_start", "No mail from this hour…")
    quiet_hours_end: int = _number("quiet_hours_end", "…to this one, in `timezone`.")
    # No max_length here: the settings say what is wrong with a zone name in words ("Unknown time zone").
    timezone: Text = Field(ABSENT, description="An IANA zone name, e.g. `Europe/Berlin` (default UTC).")
    one_time_code: bool = Field(
        False,
        description="Recipients confirm a 6-digit code sent by SMS (rows with a "
        "phone) or mail before they see and sign (default false); so does every other party of a template several "
        "sign (SMS to its `<role>_phone` or its `phone` in `parties`, else mail).",
    )
    keep_signed_days: int = _number(
        "keep_signed_days",
        "Days after signing to keep the signed documents and the signers' personal data; default: "
        "the team's (for ever unless an admin set it).",
    )
    keep_unsigned_days: int = _number(
        "keep_unsigned_days",
        "Days to keep a request that ended unsigned (declined, expired, cancelled, failed, bounced); "
        "default: the team's (90 unless an admin set it).",
    )
    text_cap: int = _number(
        "text_cap",
        "At most this many text messages for the batch; default: an invitation and each reminder per row with a "
        "phone. A text the cap stops is not sent, and the batch says so.",
    )


def _field_error(exc: ValidationError) -> BatchError:
    """The first field at fault, in people's words."""
    error = exc.errors()[0]
    field = str(error["loc"][0])
    if field in ("keep_signed_days", "keep_unsigned_days"):
        label = _NUMBERS[field][0]
        return BatchError(N_("Give %(name)s as a number of days from 1 to %(n)s.", name=label, n=MAX_KEEP_DAYS), field)
    if field in _NUMBERS:
        label, low, high = _NUMBERS[field]
        if error["type"] in ("greater_than_equal", "less_than_equal"):
            return BatchError(
                N_("%(label)s must be between %(low)s and %(high)s.", label=label, low=low, high=high), field
            )
        return BatchError(N_("%(label)s must be a whole number.", label=label), field)
    if field == "reminder_days":
        return BatchError(N_("%(label)s must be a whole number.", label=N_("Each reminder day")), field)
    if field == "language":
        return BatchError(N_("The recipients' language must be one of %(known)s.", known=", ".join(LANGUAGES)), field)
    if field == "channel":
        return _unknown_reach()
    if field == "one_time_code":
        return BatchError(N_("“Ask for a one-time code” must be true or false."), field)
    if field == "name" and error["type"] == "string_too_long":
        return BatchError(N_("The batch name is longer than 200 characters."), field)
    return BatchError(N_("%(label)s cannot be used as given.", label=_TEXTS[field]), field)


def settings_from_form(form: Mapping[str, str], *, default_name: str) -> BatchSettings:
    """Batch settings from the web form's fields (all strings; blank: the default), each checked by
    ``BatchSettingsForm``, then together; BatchError naming the field for what cannot be used."""
    given: dict[str, str] = {}
    for key in BatchSettingsForm.model_fields:
        value = (form.get(key) or "").strip()
        # A blank reminder_days is given (no reminders); left out, it is the default.
        if value or (key == "reminder_days" and form.get(key) is not None):
            given[key] = value
    try:
        fields = BatchSettingsForm.model_validate(given)
    except ValidationError as exc:
        raise _field_error(exc) from None
    return checked_settings(fields, default_name=default_name)


def checked_settings(fields: BatchSettingsForm, *, default_name: str) -> BatchSettings:
    """The batch settings from fields each valid alone (``BatchSettingsForm``): what they mean together, with the
    defaults for what was left out; BatchError naming the field for what cannot be used."""
    name = fields.name or default_name
    if CONTROL_CHARACTERS.search(name):  # the name goes into the subject of the owner's notices
        raise BatchError(N_("The batch name may not contain line breaks or other control characters."), "name")
    deadline = fields.deadline_days if fields.deadline_days is not None else 7
    raw_days = fields.reminder_days if fields.reminder_days is not None else "2,4"
    days: list[int] = []
    for part in raw_days.replace(";", ",").replace(" ", ",").split(","):
        if part:
            day = int(part)
            if not 1 <= day <= MAX_DEADLINE_DAYS:
                raise BatchError(
                    N_(
                        "%(label)s must be between %(low)s and %(high)s.",
                        label=N_("Each reminder day"),
                        low=1,
                        high=MAX_DEADLINE_DAYS,
                    ),
                    "reminder_days",
                )
            days.append(day)
    if len(days) > MAX_REMINDERS:
        raise BatchError(N_("Give at most %(n)s reminder days.", n=MAX_REMINDERS), "reminder_days")
    late = sorted(d for d in days if d >= deadline)
    if late:
        raise BatchError(
            N_(
                "Reminder days must come before the deadline (day %(deadline)s); day %(day)s is not.",
                deadline=deadline,
                day=late[0],
            ),
            "reminder_days",
        )
    # Left out: one reminder for each day given; 0: none. A maximum between would leave the last days without one.
    max_reminders = fields.max_reminders if fields.max_reminders is not None else len(set(days))
    if 0 < max_reminders < len(set(days)):
        raise BatchError(
            N_(
                "Reminders on days %(days)s need a maximum of at least %(n)s; raise it, or remove days.",
                days=", ".join(map(str, sorted(set(days)))),
                n=len(set(days)),
            ),
            "max_reminders",
        )
    reply_to = fields.reply_to or None
    if reply_to:
        reply_to, problem = check_email(reply_to)
        if problem:
            raise BatchError(N_("Reply-to: %(problem)s", problem=problem), "reply_to")
    try:
        notify_email = chosen_notice_address(choice=fields.notify_to or "", email=fields.notify_email or "")
    except NoticeAddressError as exc:
        raise BatchError(N_("Notices to: %(problem)s", problem=exc.message), "notify_email") from None
    start, end = fields.quiet_hours_start, fields.quiet_hours_end
    if (start is None) != (end is None):
        raise BatchError(N_("Give both the start and the end of the quiet hours, or neither."), "quiet_hours_start")
    if start is not None and start == end:
        raise BatchError(N_("Quiet hours must start and end at different hours."), "quiet_hours_end")
    timezone = fields.timezone or "UTC"
    # By name from the list, not by trying ZoneInfo: "America" is a folder of the zone database (an OSError).
    if timezone not in time_zones():
        raise BatchError(
            N_("Unknown time zone %(value)r; use a name such as Europe/Berlin.", value=timezone[:60]), "timezone"
        )
    return BatchSettings(
        name=name,
        deadline_days=deadline,
        reminder_days=tuple(sorted(set(days))),
        max_reminders=max_reminders,
        reply_to=reply_to,
        language=fields.language or "en",
        quiet_hours_start=start,
        quiet_hours_end=end,
        timezone=timezone,
        notify_email=notify_email,
        team_id=fields.team_id,
        one_time_code=fields.one_time_code,
        keep_signed_days=fields.keep_signed_days,
        keep_unsigned_days=fields.keep_unsigned_days,
        reach=fields.channel or Reach.MAIL,
        text_cap=fields.text_cap,
    )


@dataclass(frozen=True)
class PartySettings:
    """Who signs a template's other roles for the whole batch, and in which order every role signs."""

    #: Every role of the template, the recipient among them (``roles.template_roles``).
    roles: tuple[str, ...]
    #: Role → the batch's fixed party (``recipients.parties.fixed_parties``); a role not here is named per row.
    fixed: Mapping[str, PartyPerson]
    #: Role → its step from 0 (``signing.parties.routing_steps``).
    steps: Mapping[str, int]
    #: How the rows' phones are read when the batch texts (``row_checks.PhoneRule``); None: it only mails.
    phones: PhoneRule | None = None

    @property
    def file_check(self) -> dict[str, Any]:
        """What ``validate_recipients`` takes of them: the roles each row names, or the batch does once, and how
        the rows' phones are read."""
        return {"roles": self.roles, "fixed_roles": tuple(self.fixed), "phones": self.phones}


def _template_fixed(version: TemplateVersion) -> dict[str, PartyPerson]:
    """The one person the template names for each of its fixed parties."""
    return {
        p.key: PartyPerson(email=p.email, name=p.name)
        for p in template_parties(version)
        if p.source == PartySource.FIXED and p.email
    }


def party_settings_from_form(
    form: Mapping[str, str], *, version: TemplateVersion, phone_region: str = ""
) -> PartySettings:
    """The fixed parties and routing of a new batch from its form or API fields: ``parties`` (JSON role →
    ``{"email", "name", "phone"}``) or the web form's ``party_<role>_email`` (``_name``, ``_phone``) fields, and
    ``routing`` (JSON list of steps); with a ``channel`` that texts, how phones are read (national ones in
    ``phone_region``, the ``PHONE_REGION`` setting, else the ``language``'s). What is not given is the template's:
    its fixed parties and its signing order. BatchError naming the field."""
    try:
        require_ready(version, language=(form.get("language") or "en").strip() or "en")
    except TemplateNotReady as exc:
        raise BatchError(exc.message, "template_id") from None
    roles = template_roles(version)
    given: str | dict[str, Any] = (form.get("parties") or "").strip()
    if not given:
        given = {
            role: {
                part: (form.get(f"party_{role}_{part}") or "").strip() or None for part in ("email", "name", "phone")
            }
            for role in roles
            if role != RECIPIENT_ROLE
            and ((form.get(f"party_{role}_email") or "").strip() or (form.get(f"party_{role}_phone") or "").strip())
        }
    reach = reach_from(form.get("channel") or "")
    phones = (
        None
        if reach is Reach.MAIL
        else PhoneRule(
            region=region_for(language=(form.get("language") or "en").strip(), setting=phone_region),
            without_address=reach.without_address,
        )
    )
    try:
        # The template's fixed people sign unless the batch names another.
        fixed = {**_template_fixed(version), **fixed_parties(given, roles=roles, phones=phones)}
        routing = (form.get("routing") or "").strip() or template_routing(version)
        steps = parties.routing_steps(routing, roles=roles)
        # A field that waits on another party's field: that party signs before, in this batch's order too.
        order = [[r for r, s in steps.items() if s == step] for step in sorted(set(steps.values()))]
        check_conditions([f.conditioned for f in template_fields(version)], routing=order)
    except PartyError as exc:
        raise BatchError(exc.message, "parties") from None
    except (parties.RoutingError, FieldSettingsError) as exc:
        raise BatchError(exc.message, "routing") from None
    return PartySettings(roles=tuple(roles), fixed=fixed, steps=steps, phones=phones)
