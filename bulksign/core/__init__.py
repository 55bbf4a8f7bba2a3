"""What every layer stands on: settings, logs, messages for people, Flask extensions, Redis, time zones and languages,
tokens, keyset cursors, bounded slices, spreadsheet-safe cells, zip limits, the organisation's branding and error
tracking. Knows no domain and no table.
"""
