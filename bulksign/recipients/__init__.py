"""Recipients files: reading CSV and XLSX as streams of rows (``files``), checking every row against a template
(``validation``), the file kept between check and create (``uploads``), and the suppression list of addresses no
mail goes to.
"""
