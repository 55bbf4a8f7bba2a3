"""Mail and text messages: the outgoing-mail log, headers, one mail sent and what happened to it, the throttle,
DKIM, the SMTP link and its health, the local catcher, SMS and address checks (docs/architecture/mail.md).
"""
