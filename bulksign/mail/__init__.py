"""Mail and text messages: the outgoing-mail log written before anything is sent (``mailer``), every header made in one
place (``mail_headers``), the global throttle, DKIM, the SMTP link and the mail server's health, the local catcher
for a first run, SMS, and address checks.
"""
