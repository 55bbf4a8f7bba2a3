"""Document templates: versions and their save flow, the bounded Jinja sandbox they render in, one renderer per kind
(HTML, Word, fillable PDF) with its safety checks, and template errors in plain words; see
docs/architecture/doc_templates.md."""
