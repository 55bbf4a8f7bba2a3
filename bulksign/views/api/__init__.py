"""The JSON API, version 1: what every operation shares (``common``) and one blueprint per area; its OpenAPI
description (``docs``).
"""
