"""Bulksign: send thousands of personalised documents for e-signature and follow each to the end.

The app is made by ``bulksign.app.create_app``; the release is ``bulksign.core.version.__version__``.
"""
