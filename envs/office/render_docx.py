"""Render a document to docx with python-docx: a title, narrative paragraphs, captioned grid tables."""
from __future__ import annotations

import io

from jointrl.envs.office.documents import Document, PageBreak


def render(document: Document) -> bytes:
    """The docx file's bytes; each table is preceded by its caption as a paragraph of its own."""
    import docx

    out = docx.Document()
    out.core_properties.title = document.title
    out.add_heading(document.title, level=0)
    # Looking a style up by name scans the style part each time; the object is found once.
    grid_style = out.styles["Table Grid"]
    for block in document.blocks:
        if isinstance(block, PageBreak):
            out.add_page_break()
            continue
        if isinstance(block, str):
            out.add_paragraph(block)
            continue
        out.add_paragraph().add_run(block.caption).bold = True
        grid = out.add_table(rows=1 + len(block.rows), cols=len(block.header))
        grid.style = grid_style
        for cell, label in zip(grid.rows[0].cells, block.header):
            cell.text = label
        for cells, row in zip(grid.rows[1:], block.rows):
            for cell, text in zip(cells.cells, block.display(row)):
                cell.text = text
    buffer = io.BytesIO()
    out.save(buffer)
    return buffer.getvalue()
