"""What other systems talk to: outgoing webhooks, and idempotency keys for API clients that retry."""
