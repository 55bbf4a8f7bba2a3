"""A new batch's settings from its form or API fields, checked once: its options, its own retention periods, and
who signs a template's other roles. ``create_batch`` takes what these return."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bulksign.batches.notices import NoticeAddressError, chosen_notice_address
from bulksign.batches.retention.periods import RetentionError, batch_days_from_form
from bulksign.core.config import LANGUAGES, time_zones
from bulksign.core.errors import BulksignError, Message
from bulksign.core.messages import N_
from bulksign.doc_templates.roles import template_roles
from bulksign.doc_templates.template_check import TemplateNotReady, require_ready
from bulksign.doc_templates.template_parties import PartySource, template_parties, template_routing
from bulksign.mail.email_checks import check_email
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import TemplateVersion
from bulksign.models.parties import RECIPIENT_ROLE
from bulksign.recipients.parties import PartyError, PartyPerson, fixed_parties
from bulksign.signing import parties

MAX_REMINDERS = 5
MAX_DEADLINE_DAYS = 365


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


def _whole_number(raw, field: str, label: N_, low: int, high: int) -> int:
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        raise BatchError(N_("%(label)s must be a whole number.", label=label), field) from None
    if not low <= value <= high:
        raise BatchError(N_("%(label)s must be between %(low)s and %(high)s.", label=label, low=low, high=high), field)
    return value


def settings_from_form(form: Mapping[str, str], *, default_name: str) -> BatchSettings:
    """Batch settings from form or multipart fields (all strings), with the defaults for what is blank; BatchError
    naming the field for what cannot be used."""

    def given(key: str) -> str:
        return (form.get(key) or "").strip()

    name = given("name") or default_name
    if len(name) > 200:
        raise BatchError(N_("The batch name is longer than 200 characters."), "name")
    if CONTROL_CHARACTERS.search(name):  # the name goes into the subject of the owner's notices
        raise BatchError(N_("The batch name may not contain line breaks or other control characters."), "name")
    deadline = _whole_number(given("deadline_days") or 7, "deadline_days", N_("Deadline (days)"), 1, MAX_DEADLINE_DAYS)
    raw_days = given("reminder_days") if form.get("reminder_days") is not None else "2,4"
    days: list[int] = []
    for part in raw_days.replace(";", ",").replace(" ", ",").split(","):
        if part:
            days.append(_whole_number(part, "reminder_days", N_("Each reminder day"), 1, MAX_DEADLINE_DAYS))
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
    # Blank: one reminder for each day given; 0: none. A maximum between would leave the last days without one.
    max_reminders = _whole_number(
        given("max_reminders") or len(set(days)), "max_reminders", N_("Maximum reminders"), 0, MAX_REMINDERS
    )
    if 0 < max_reminders < len(set(days)):
        raise BatchError(
            N_(
                "Reminders on days %(days)s need a maximum of at least %(n)s; raise it, or remove days.",
                days=", ".join(map(str, sorted(set(days)))),
                n=len(set(days)),
            ),
            "max_reminders",
        )
    reply_to = given("reply_to") or None
    if reply_to:
        reply_to, problem = check_email(reply_to)
        if problem:
            raise BatchError(N_("Reply-to: %(problem)s", problem=problem), "reply_to")
    try:
        notify_email = chosen_notice_address(choice=given("notify_to"), email=given("notify_email"))
    except NoticeAddressError as exc:
        raise BatchError(N_("Notices to: %(problem)s", problem=exc.message), "notify_email") from None
    team_id = _whole_number(given("team_id"), "team_id", N_("Team"), 1, 2**31 - 1) if given("team_id") else None
    language = given("language") or "en"
    if language not in LANGUAGES:
        raise BatchError(
            N_("The recipients' language must be one of %(known)s.", known=", ".join(LANGUAGES)), "language"
        )
    start, end = given("quiet_hours_start"), given("quiet_hours_end")
    if bool(start) != bool(end):
        raise BatchError(N_("Give both the start and the end of the quiet hours, or neither."), "quiet_hours_start")
    quiet: tuple[int | None, int | None] = (None, None)
    if start:
        quiet = (
            _whole_number(start, "quiet_hours_start", N_("Quiet hours start"), 0, 23),
            _whole_number(end, "quiet_hours_end", N_("Quiet hours end"), 0, 23),
        )
        if quiet[0] == quiet[1]:
            raise BatchError(N_("Quiet hours must start and end at different hours."), "quiet_hours_end")
    timezone = given("timezone") or "UTC"
    # By name from the list, not by trying ZoneInfo: "America" is a folder of the zone database (an OSError).
    if timezone not in time_zones():
        raise BatchError(
            N_("Unknown time zone %(value)r; use a name such as Europe/Berlin.", value=timezone[:60]), "timezone"
        )
    one_time_code = given("one_time_code").lower()
    if one_time_code not in ("", "0", "false", "no", "off", "1", "true", "yes", "on"):
        raise BatchError(N_("“Ask for a one-time code” must be true or false."), "one_time_code")
    try:
        keep_signed_days, keep_unsigned_days = batch_days_from_form(form)
    except RetentionError as exc:
        raise BatchError(exc.message, exc.field) from None
    return BatchSettings(
        name=name,
        deadline_days=deadline,
        reminder_days=tuple(sorted(set(days))),
        max_reminders=max_reminders,
        reply_to=reply_to,
        language=language,
        quiet_hours_start=quiet[0],
        quiet_hours_end=quiet[1],
        timezone=timezone,
        notify_email=notify_email,
        team_id=team_id,
        one_time_code=one_time_code in ("1", "true", "yes", "on"),
        keep_signed_days=keep_signed_days,
        keep_unsigned_days=keep_unsigned_days,
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

    @property
    def file_check(self) -> dict:
        """What ``validate_recipients`` takes of them: the roles each row names, or the batch does once."""
        return {"roles": self.roles, "fixed_roles": tuple(self.fixed)}


def _template_fixed(version: TemplateVersion) -> dict[str, PartyPerson]:
    """The one person the template names for each of its fixed parties."""
    return {
        p.key: PartyPerson(email=p.email, name=p.name)
        for p in template_parties(version)
        if p.source == PartySource.FIXED and p.email
    }


def party_settings_from_form(form: Mapping[str, str], *, version: TemplateVersion) -> PartySettings:
    """The fixed parties and routing of a new batch from its form or API fields: ``parties`` (JSON role →
    ``{"email", "name", "phone"}``) or the web form's ``party_<role>_email`` (``_name``, ``_phone``) fields, and
    ``routing`` (JSON list of steps). What is not given is the template's: its fixed parties and its signing order.
    BatchError naming the field for what cannot be used."""
    try:
        require_ready(version, language=(form.get("language") or "en").strip() or "en")
    except TemplateNotReady as exc:
        raise BatchError(exc.message, "template_id") from None
    roles = template_roles(version)
    given: str | dict = (form.get("parties") or "").strip()
    if not given:
        given = {
            role: {
                part: (form.get(f"party_{role}_{part}") or "").strip() or None for part in ("email", "name", "phone")
            }
            for role in roles
            if role != RECIPIENT_ROLE and (form.get(f"party_{role}_email") or "").strip()
        }
    try:
        # The template's fixed people sign unless the batch names another.
        fixed = {**_template_fixed(version), **fixed_parties(given, roles=roles)}
        routing = (form.get("routing") or "").strip() or template_routing(version)
        steps = parties.routing_steps(routing, roles=roles)
    except PartyError as exc:
        raise BatchError(exc.message, "parties") from None
    except parties.RoutingError as exc:
        raise BatchError(exc.message, "routing") from None
    return PartySettings(roles=tuple(roles), fixed=fixed, steps=steps)
