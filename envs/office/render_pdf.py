"""Render a document to pdf with reportlab: paragraphs and captioned tables that break across pages."""
from __future__ import annotations

import io

from jointrl.envs.office.documents import Document, PageBreak


def render(document: Document) -> bytes:
    """The pdf's bytes (A4, header row repeated on every page a table spans, page numbers in the footer)."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import LongTable, PageBreak as NewPage, Paragraph, SimpleDocTemplate, Spacer, TableStyle

    styles = getSampleStyleSheet()
    grid = TableStyle([
        ("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
        ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
        ("FONTSIZE", (0, 0), (-1, -1), 9),
        ("ALIGN", (2, 1), (-1, -1), "RIGHT"),
        ("TOPPADDING", (0, 0), (-1, -1), 4),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
    ])
    story = [Paragraph(document.title, styles["Title"])]
    for block in document.blocks:
        if isinstance(block, PageBreak):
            story.append(NewPage())
            continue
        if isinstance(block, str):
            story += [Paragraph(block, styles["BodyText"]), Spacer(1, 6)]
            continue
        table = LongTable([list(block.header), *map(block.display, block.rows)], repeatRows=1)
        table.setStyle(grid)
        story += [Spacer(1, 8), Paragraph(block.caption, styles["Heading4"]), table]

    def footer(canvas, doc):
        canvas.setFont("Helvetica", 8)
        canvas.drawCentredString(A4[0] / 2, 24, f"{document.title} - page {doc.page}")

    buffer = io.BytesIO()
    # invariant=1 pins the creation date and ids so the same document always gives the same bytes.
    SimpleDocTemplate(buffer, pagesize=A4, invariant=1, title=document.title).build(story, onFirstPage=footer, onLaterPages=footer)
    return buffer.getvalue()
