"""Staff pages: home, the dashboard of batches, templates, new batches, reminders and resends, sharing, login."""
