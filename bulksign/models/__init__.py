"""Tables only. Rules live in the domain modules; statuses change only through ``states.transition``.
More in docs/architecture/models.md."""

from __future__ import annotations

from bulksign.models.address_changes import AddressChange
from bulksign.models.base import BigId, UTCDateTime, utcnow
from bulksign.models.batches import (
    Batch,
    BatchShare,
    BatchSkippedRow,
    BatchStatusCount,
    BatchVersion,
    Export,
    RecipientUpload,
)
from bulksign.models.corrections import Correction, ReplacedLink
from bulksign.models.countersign import CountersignLink, CountersignRun
from bulksign.models.fields import FieldValue
from bulksign.models.integrations import IdempotencyKey, WebhookDelivery, WebhookEndpoint
from bulksign.models.mail import OutgoingMail, PhoneSuppression, Suppression
from bulksign.models.parties import RECIPIENT_ROLE, Party
from bulksign.models.people import ApiKey, MembershipChange, Team, TeamMember, User
from bulksign.models.requests import Document, Event, OneTimeCode, SealCertificate, SigningRequest
from bulksign.models.templates import ColumnMapping, DocumentTemplate, TemplateVersion, WordCheck

__all__ = [
    "AddressChange",
    "ApiKey",
    "Batch",
    "BatchShare",
    "BatchSkippedRow",
    "BatchStatusCount",
    "BatchVersion",
    "BigId",
    "ColumnMapping",
    "Correction",
    "CountersignLink",
    "CountersignRun",
    "Document",
    "DocumentTemplate",
    "Event",
    "Export",
    "FieldValue",
    "IdempotencyKey",
    "MembershipChange",
    "OneTimeCode",
    "OutgoingMail",
    "Party",
    "RECIPIENT_ROLE",
    "RecipientUpload",
    "ReplacedLink",
    "SealCertificate",
    "SigningRequest",
    "PhoneSuppression",
    "Suppression",
    "Team",
    "TeamMember",
    "TemplateVersion",
    "UTCDateTime",
    "User",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WordCheck",
    "utcnow",
]
