"""What a recipient's link leads to: issuing and finding links, the invitation mail, opening, signing and declining
(``recipient_actions``) and one-time codes.
"""
