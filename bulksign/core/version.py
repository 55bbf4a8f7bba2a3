"""The release this code is: what error reports and the API description name (``bulksign@<version>``)."""

__version__ = "1.0.0"
