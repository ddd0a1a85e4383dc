"""The reading tools' text: an xlsx range as a grid, a docx as paginated lines, a pdf page as layout text.

Each reader takes a file's bytes (the env's pristine copy) and returns bounded text; a request the
file cannot satisfy raises ToolFailure with what is available instead. Parses are cached by the
file's bytes, so the sheets of a workbook or the pages of a document are parsed once per process.
"""
from __future__ import annotations

import io
import textwrap
from functools import lru_cache

from jointrl.envs.base import ToolFailure

MAX_ROWS, MAX_COLUMNS = 60, 20  # one read_xlsx call shows at most this many rows and columns
DOCX_PAGE_LINES, DOCX_PAGE_CHARS = 25, 3000  # a read_docx page holds at most this many lines and characters
PDF_PAGE_CHARS = 8000
SEPARATOR = " | "


@lru_cache(maxsize=16)
def _workbook(data: bytes) -> dict[str, list[tuple]]:
    """Every sheet's rows of values, parsed once per file (the cache key is the file's bytes)."""
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        return {name: list(book[name].iter_rows(values_only=True)) for name in book.sheetnames}
    finally:
        book.close()


def xlsx_range(data: bytes, file: str, sheet: str, cell_range: str | None) -> str:
    """Cells of one sheet as rows 'N | a | b', with column letters on top; ranges beyond the cap are cut."""
    from openpyxl.utils.cell import get_column_letter, range_boundaries

    sheets = _workbook(data)
    if sheet not in sheets:
        raise ToolFailure(f"{file} has no sheet {sheet!r}; its sheets are: {', '.join(sheets)}")
    rows = sheets[sheet]
    used_rows, used_cols = len(rows), max((len(r) for r in rows), default=0)
    if used_rows == 0 or used_cols == 0:
        return f"{file} / {sheet}: the sheet is empty"
    full = f"A1:{get_column_letter(used_cols)}{used_rows}"
    if cell_range:
        try:
            min_col, min_row, max_col, max_row = range_boundaries(cell_range.upper().replace("$", ""))
        except (ValueError, TypeError) as err:
            raise ToolFailure(f"range {cell_range!r} is not an A1 range like 'A1:D20' ({err})") from None
        min_col, min_row = min_col or 1, min_row or 1
        max_col, max_row = min(max_col or used_cols, used_cols), min(max_row or used_rows, used_rows)
    else:
        min_col, min_row, max_col, max_row = 1, 1, used_cols, used_rows
    if min_row > max_row or min_col > max_col:
        return f"{file} / {sheet}: range {cell_range} holds no cells (the sheet spans {full})"
    cut_row, cut_col = min(max_row, min_row + MAX_ROWS - 1), min(max_col, min_col + MAX_COLUMNS - 1)
    shown = f"{get_column_letter(min_col)}{min_row}:{get_column_letter(cut_col)}{cut_row}"
    lines = [f"{file} / {sheet}, cells {shown} (the sheet spans {full})",
             "   " + SEPARATOR + SEPARATOR.join(get_column_letter(c) for c in range(min_col, cut_col + 1))]
    for number in range(min_row, cut_row + 1):
        row = rows[number - 1]
        cells = [_cell(row[c - 1]) if c - 1 < len(row) else "" for c in range(min_col, cut_col + 1)]
        while cells and cells[-1] == "":
            cells.pop()
        lines.append(f"{number:>3}" + SEPARATOR + SEPARATOR.join(cells))
    if (cut_row, cut_col) != (max_row, max_col):
        lines.append(f"[cut at {MAX_ROWS} rows x {MAX_COLUMNS} columns; ask for the rest with a range, "
                     f"e.g. {get_column_letter(min_col)}{cut_row + 1}:{get_column_letter(max_col)}{max_row}]")
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


@lru_cache(maxsize=16)
def docx_pages(data: bytes) -> tuple[str, ...]:
    """The document's paragraphs and tables in order ('| a | b |' rows), split into bounded pages and at page breaks."""
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    # A hard page break in the document starts a new page here too (None marks it among the lines).
    lines: list[str | None] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                lines.append("| " + SEPARATOR.join(c.text.strip() for c in row.cells) + " |")
            continue
        if block._p.xpath("./w:r/w:br[@w:type='page']"):
            lines.append(None)
        if block.text.strip():
            lines.append(block.text.strip())
    pages: list[str] = []
    page: list[str] = []
    for line in lines:
        if page and (line is None or len(page) >= DOCX_PAGE_LINES or sum(map(len, page)) + len(line) > DOCX_PAGE_CHARS):
            pages.append("\n".join(page))
            page = []
        if line is not None:
            page.append(line)
    pages.append("\n".join(page))
    return tuple(pages)


def pdf_pages(data: bytes) -> int:
    """How many pages the pdf has."""
    import pypdf

    return len(pypdf.PdfReader(io.BytesIO(data)).pages)


@lru_cache(maxsize=64)
def pdf_page(data: bytes, page: int) -> str:
    """One page's text as pypdf lays it out, blank lines dropped and the common indent removed."""
    import pypdf

    pages = pypdf.PdfReader(io.BytesIO(data)).pages
    if not 1 <= page <= len(pages):
        raise ToolFailure(f"page {page} does not exist; the pdf has pages 1 to {len(pages)}")
    text = pages[page - 1].extract_text(extraction_mode="layout")
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    text = textwrap.dedent("\n".join(lines))
    return text if len(text) <= PDF_PAGE_CHARS else text[:PDF_PAGE_CHARS] + "\n[page text cut]"
