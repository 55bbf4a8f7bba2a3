"""Document templates: immutable versions, the Jinja sandbox they render in and the checks at save (``versions``), one
renderer per kind behind one interface (``kinds``: HTML, Word, fillable PDF), the Word and PDF specifics and their
safety checks, and template errors in plain words.
"""
