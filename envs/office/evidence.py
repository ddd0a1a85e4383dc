"""What the scripted solution has read: the reading tools' text parsed back into captioned tables.

The demo computes its answer only from these tables (never from the generator's figures), so a demo
that scores full marks shows that the documents, the tools' text and the gold answer agree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from jointrl.envs.office.readers import SEPARATOR

PDF_CAPTION = re.compile(r"^Table \d+: ")
PDF_COLUMNS = re.compile(r"\s{2,}")
XLSX_ROW = re.compile(r"^\s*(\d+) \| ?(.*)$")


def number(text: str) -> float:
    """A printed figure ('1,234.5', '93.4') as a float."""
    return float(text.replace(",", ""))


@dataclass
class Table:
    """A table as read: its caption, header labels and rows of cell text."""

    caption: str
    header: list[str]
    rows: list[list[str]]

    def records(self) -> list[dict[str, str]]:
        """Each row as a mapping from header label to cell text."""
        return [dict(zip(self.header, row)) for row in self.rows]

    def find(self, **where: str) -> dict[str, str]:
        """The one row whose cells equal `where` (header label -> text)."""
        found = [r for r in self.records() if all(r.get(k) == v for k, v in where.items())]
        assert len(found) == 1, f"{self.caption}: {len(found)} rows match {where}"
        return found[0]

    def value(self, column: str, **where: str) -> float:
        """The figure in `column` of the row matching `where`."""
        return number(self.find(**where)[column])

    def column(self, label: str) -> list[str]:
        """Every row's cell under one header label."""
        return [r[label] for r in self.records()]


class Evidence:
    """Tool outputs gathered during the demo, by file; paginated files are joined in page order."""

    def __init__(self):
        self.sheets: dict[str, Table] = {}
        self.pages: dict[str, dict[int, str]] = {}

    def add(self, tool: str, arguments: dict, output: str) -> None:
        """Record one reading tool's output."""
        if tool == "read_xlsx":
            self.sheets[arguments["sheet"]] = _xlsx_table(output)
        elif tool in ("read_docx", "read_pdf"):
            # Drop the tool's own first line ('file, page i of n').
            self.pages.setdefault(arguments["file"], {})[arguments.get("page", 1)] = output.split("\n", 1)[1]

    def sheet(self, name: str) -> Table:
        """The table read from one workbook sheet."""
        return self.sheets[name]

    def text(self, file: str) -> str:
        """The pages of one docx or pdf read so far, in order."""
        pages = self.pages[file]
        return "\n".join(pages[p] for p in sorted(pages))

    def table(self, file: str, stem: str) -> Table:
        """The one table of a docx or pdf whose caption contains `stem`."""
        parse = _docx_tables if file.endswith(".docx") else _pdf_tables
        found = [t for t in parse(self.text(file)) if stem in t.caption]
        assert len(found) == 1, f"{file}: {len(found)} tables captioned with {stem!r}"
        return found[0]


def _xlsx_table(output: str) -> Table:
    rows = [m.group(2).split(SEPARATOR) for line in output.splitlines()[2:] if (m := XLSX_ROW.match(line))]
    width = max(len(r) for r in rows)
    start = next(i for i, r in enumerate(rows) if len(r) == width)
    caption = rows[0][0] if start > 0 else ""
    return Table(caption, rows[start], [r for r in rows[start + 1:] if len(r) == width])


def _docx_tables(text: str) -> list[Table]:
    tables, caption, current = [], "", None
    for line in text.splitlines():
        if line.startswith("| ") and line.endswith(" |"):
            cells = line[2:-2].split(SEPARATOR)
            if current is None:
                current = Table(caption, cells, [])
                tables.append(current)
            else:
                current.rows.append(cells)
        else:
            caption, current = line, None
    return tables


def _pdf_tables(text: str) -> list[Table]:
    # A table runs from its caption to the next caption; a page break repeats the header and adds a
    # footer, and neither splits into the header's number of columns unless it is the header itself.
    tables: list[Table] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not PDF_CAPTION.match(line.strip()):
            continue
        header = PDF_COLUMNS.split(lines[i + 1].strip())
        table = Table(line.strip(), header, [])
        for row in lines[i + 2:]:
            if PDF_CAPTION.match(row.strip()):
                break
            cells = PDF_COLUMNS.split(row.strip())
            if len(cells) == len(header) and cells != header:
                table.rows.append(cells)
        tables.append(table)
    return tables
