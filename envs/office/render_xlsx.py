"""Render a document to an xlsx workbook with openpyxl: one sheet per table, a title row, a header row."""
from __future__ import annotations

import io

from jointrl.envs.office.documents import Document, Table

# Excel number formats matching the display formats the docx and pdf print.
NUMBER_FORMATS = {",.1f": "#,##0.0", ",.2f": "#,##0.00", ",.4f": "#,##0.0000", ",d": "#,##0", ".1f": "0.0"}
TITLE_ROW, HEADER_ROW = 1, 2  # data starts on the row after the header


def render(document: Document) -> bytes:
    """The workbook's bytes; numbers are stored as numbers so formulas and openpyxl read them back exactly."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    book.remove(book.active)
    for table in document.tables():
        _sheet(book.create_sheet(table.sheet), table, Font(bold=True))
    notes = [b for b in document.blocks if isinstance(b, str)]
    if notes:
        sheet = book.create_sheet("Notes")
        for row, text in enumerate(notes, start=1):
            sheet.cell(row=row, column=1, value=text)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _sheet(sheet, table: Table, bold) -> None:
    sheet.cell(row=TITLE_ROW, column=1, value=table.caption).font = bold
    for column, label in enumerate(table.header, start=1):
        sheet.cell(row=HEADER_ROW, column=column, value=label).font = bold
    for row, values in enumerate(table.rows, start=HEADER_ROW + 1):
        for column, (value, spec) in enumerate(zip(values, table.formats), start=1):
            cell = sheet.cell(row=row, column=column, value=value)
            if spec:
                cell.number_format = NUMBER_FORMATS[spec]
    sheet.column_dimensions["A"].width = 14
    sheet.freeze_panes = sheet.cell(row=HEADER_ROW + 1, column=1)
