"""Documents as files: rendering HTML (wkhtmltopdf) and Word (LibreOffice) in the converters' sandbox, reading PDFs
(poppler, PDFium), page images, the signature box, the signed PDF with its audit record and certificate, the organisation's
seal and its verification, and the storage the bytes live in.
"""
