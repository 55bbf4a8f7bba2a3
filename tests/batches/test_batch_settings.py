"""A new batch's settings are checked once, by one model the web form and the API share."""

from __future__ import annotations

import pytest

from bulksign.batches.batch_settings import BatchError, BatchSettingsForm, settings_from_form
from bulksign.views.api.uploads import BatchForm


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("deadline_days", "366", "Deadline (days) must be between 1 and 365."),
        ("deadline_days", "seven", "Deadline (days) must be a whole number."),
        ("max_reminders", "6", "Maximum reminders must be between 0 and 5."),
        ("quiet_hours_start", "24", "Quiet hours start must be between 0 and 23."),
        ("team_id", "0", "Team must be between 1 and 2147483647."),
        ("keep_signed_days", "0", "Give Keep signed documents as a number of days from 1 to 36500."),
        ("reminder_days", "2,x", "Each reminder day must be a whole number."),
        ("reminder_days", "0", "Each reminder day must be between 1 and 365."),
        ("language", "de", "The recipients' language must be one of en, ru."),
        ("one_time_code", "maybe", "“Ask for a one-time code” must be true or false."),
        ("name", "x" * 201, "The batch name is longer than 200 characters."),
        ("reply_to", "a\x00b@example.com", "Reply-to address cannot be used as given."),
    ],
)
def test_a_field_that_cannot_be_used_is_named_in_words(app, field, value, message):
    with pytest.raises(BatchError) as refused:
        settings_from_form({field: value}, default_name="Contracts")
    assert (refused.value.field, str(refused.value.message)) == (field, message)


def test_blank_fields_take_their_defaults_and_a_blank_reminder_list_means_none(app):
    settings = settings_from_form({"name": "  ", "deadline_days": " ", "reminder_days": ""}, default_name="Contracts")
    assert (settings.name, settings.deadline_days, settings.reminder_days, settings.max_reminders) == (
        "Contracts",
        7,
        (),
        0,
    )
    assert settings_from_form({}, default_name="Contracts").reminder_days == (2, 4)


def test_the_api_documents_every_setting_with_the_bounds_the_web_form_checks():
    api = BatchForm.model_json_schema()["properties"]
    settings = BatchSettingsForm.model_json_schema()["properties"]
    assert set(settings) <= set(api)
    assert (api["deadline_days"]["maximum"], api["max_reminders"]["maximum"], api["quiet_hours_end"]["maximum"]) == (
        365,
        5,
        23,
    )
    assert api["language"]["enum"] == ["en", "ru"]
