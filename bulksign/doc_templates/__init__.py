"""Document templates: immutable versions and the save flow (``versions``), the bounded Jinja sandbox they render in
(``jinja_sandbox``), the variables they need (``variables``), the HTML safety check at save (``html_safety``), the
mail texts a version carries (``mail_texts``), one renderer per kind behind one interface (``kinds``: HTML, Word,
fillable PDF), the Word and PDF specifics and their safety checks, and template errors in plain words (``errors``,
``template_words``).

Imports go one way: ``errors``, ``jinja_sandbox``, ``variables``, ``html_safety`` and ``mail_texts`` import nothing of
the kinds' modules; ``docx_*``, ``pdf_*`` and ``kinds`` build on them; ``versions`` builds on ``kinds``.
"""
