"""The office env: a question over generated report files, answered with reading tools and sandboxed Python.

Documents are rendered from the seed on first use and cached per process, so a reset costs little and
two episodes of one seed share the work. The reading tools read the env's pristine in-memory copies,
never the workspace: a program run through `python` may overwrite workspace files without changing
what the tools show or how the answer is scored. The sandbox (with the files copied into its
workspace) starts only when the episode first calls `python`.
"""
from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Iterator

from jointrl.envs.base import Action, Env, ToolFailure, tool
from jointrl.envs.office import documents, families_combine, families_long, families_read, long_documents, matching, readers
from jointrl.envs.office.evidence import Evidence
from jointrl.envs.office.report import SIZES, generate
from jointrl.envs.office.task import Files, Read, Task, Unsuitable

FAMILIES = {
    "lookup": families_read.lookup,
    "yoy-growth": families_read.growth,
    "aggregate": families_read.aggregate,
    "argmax": families_read.argmax,
    "ranking": families_read.ranking,
    "rate-join": families_combine.rate_join,
    "currency": families_combine.currency,
    "margin": families_combine.margin,
    "threshold-count": families_combine.threshold,
    "budget-variance": families_combine.variance,
    "segment-overhead": families_long.segment_overhead,
}
ATTEMPTS = 8  # report variants tried before a family gives up on a seed
PYTHON_SECONDS = 20.0
PYTHON_OUTPUT_BYTES = 16 << 10  # of stdout and of stderr, per call
PAGE_OF = re.compile(r"page \d+ of (\d+)")

SYSTEM = """You answer a question about the documents of {org}, which reports on {count} regions: {regions}. The files \
are in your workspace: a workbook (xlsx), an annual report (docx) and a KPI review (pdf); some facts appear in only one of them.

Tools:
- list_files(): the files and what each holds.
- read_xlsx(file, sheet, range?): cells of one sheet as a grid, at most {rows} rows x {cols} columns per call; \
range in A1 notation such as "A1:H30".
- read_docx(file, page?): the document's paragraphs and tables (rows as "| a | b |"), one page at a time.
- read_pdf(file, page): the text of one page of a pdf.
- python(code): run a Python 3 program in a sandbox whose working directory holds the files (openpyxl, \
python-docx and pypdf are installed; no network); print what you need.

Answer: when you are done, reply without a tool call; that reply is your answer and holds only the answer. \
Give a number in the unit the question asks for (e.g. `1234.5` or `{currency} 1,234.5 thousand`; separators and \
the currency code are fine, a different currency is wrong), a percentage as `12.34%`, a count or a position as a \
whole number, or a name as the documents write it. A number is correct within 0.5% of the exact value \
(or 0.01 absolute), so do not round intermediate results."""


@lru_cache(maxsize=32)
def _documents(seed: int, difficulty: str, variant: int) -> tuple:
    report = generate(seed, difficulty, variant)
    # The long tier's annual report and KPI review run to 30+ pages; the workbook is the same kind.
    pages = long_documents if report.long else documents
    bundle = (documents.workbook(report), pages.annual_report(report), pages.kpi_review(report))
    return report, {d.name: d for d in bundle}


@lru_cache(maxsize=96)
def _rendered(seed: int, difficulty: str, variant: int, name: str) -> bytes:
    """A file's bytes, rendered once per process."""
    document = _documents(seed, difficulty, variant)[1][name]
    if document.kind == "xlsx":
        from jointrl.envs.office import render_xlsx as renderer
    elif document.kind == "docx":
        from jointrl.envs.office import render_docx as renderer
    else:
        from jointrl.envs.office import render_pdf as renderer
    return renderer.render(document)


def build_task(family: str, difficulty: str, seed: int) -> tuple[int, Task]:
    """The (report variant, task) of one seed: the first report variant on which the family is well posed."""
    for variant in range(ATTEMPTS):
        report, docs = _documents(seed, difficulty, variant)
        try:
            return variant, FAMILIES[family](report, Files(docs), difficulty, random.Random(f"office:{family}:{difficulty}:{seed}:{variant}"))
        except Unsuitable:
            continue
    raise RuntimeError(f"office/{family}:{difficulty} found no well-posed question for seed {seed} in {ATTEMPTS} report variants")


class OfficeEnv(Env):
    """Answer one question about a generated organisation's xlsx, docx and pdf reports."""

    def __init__(self, difficulty: str = "easy", family: str = "lookup", **kwargs):
        if family not in FAMILIES:
            raise ValueError(f"unknown office family {family!r}; expected one of {sorted(FAMILIES)}")
        if difficulty not in SIZES:
            raise ValueError(f"unknown office difficulty {difficulty!r}; expected one of {sorted(SIZES)}")
        super().__init__(difficulty=difficulty, family=family, **kwargs)
        self.family = family
        self._sandbox = None
        self._last_output = ""

    def _reset(self, seed: int) -> list[dict]:
        self.close()
        self._variant, self.task = build_task(self.family, self.difficulty, seed)
        self.report, self._docs = _documents(seed, self.difficulty, self._variant)
        self._opened: set[str] = set()
        # Naming the report's regions makes every seed's prompt its own: a question that names no region would
        # otherwise read the same for two reports of one organisation and year.
        system = SYSTEM.format(org=self.report.org, count=len(self.report.regions), regions=documents.join(self.report.regions),
                               rows=readers.MAX_ROWS, cols=readers.MAX_COLUMNS, currency=self.report.currency)
        return [{"role": "system", "content": system}, {"role": "user", "content": self.task.question}]

    def file_bytes(self, file: str) -> bytes:
        """The pristine bytes of one of the episode's files (what the reading tools read)."""
        if file not in self._docs:
            raise ToolFailure(f"no file named {file!r}; the files are: {', '.join(self._docs)}")
        return _rendered(self.seed, self.difficulty, self._variant, file)

    def _data(self, file: str, kind: str) -> bytes:
        data = self.file_bytes(file)
        if self._docs[file].kind != kind:
            raise ToolFailure(f"{file} is a {self._docs[file].kind} file; read it with read_{self._docs[file].kind}")
        self._opened.add(file)
        return data

    # Tools.

    @tool("List the files in the workspace with what each holds.")
    def list_files(self) -> str:
        return "\n".join(f"{d.name} ({d.kind}): {d.summary}" for d in self._docs.values())

    @tool("Read cells of one sheet of an xlsx workbook as a grid of values (row numbers left, column letters on top).", {
        "type": "object",
        "properties": {"file": {"type": "string"}, "sheet": {"type": "string"},
                       "range": {"type": "string", "description": "A1 range such as 'A1:H30'; the whole sheet if omitted (capped)"}},
        "required": ["file", "sheet"],
    })
    def read_xlsx(self, file: str, sheet: str, range: str | None = None) -> str:  # noqa: A002 - the tool's argument name
        return readers.xlsx_range(self._data(file, "xlsx"), file, sheet, range)

    @tool("Read one page of a docx document: its paragraphs and tables in order, tables as '| a | b |' rows.", {
        "type": "object",
        "properties": {"file": {"type": "string"}, "page": {"type": "integer", "minimum": 1, "description": "1 if omitted"}},
        "required": ["file"],
    })
    def read_docx(self, file: str, page: int = 1) -> str:
        pages = readers.docx_pages(self._data(file, "docx"))
        if page > len(pages):
            raise ToolFailure(f"page {page} does not exist; {file} has pages 1 to {len(pages)}")
        return f"{file}, page {page} of {len(pages)}\n{pages[page - 1]}"

    @tool("Read the text of one page of a pdf document.", {
        "type": "object",
        "properties": {"file": {"type": "string"}, "page": {"type": "integer", "minimum": 1}},
        "required": ["file", "page"],
    })
    def read_pdf(self, file: str, page: int) -> str:
        data = self._data(file, "pdf")
        return f"{file}, page {page} of {readers.pdf_pages(data)}\n{readers.pdf_page(data, page)}"

    @tool("Run a Python 3 program in a sandbox whose working directory holds the files; returns its output.", {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "the program; print the results you need"}},
        "required": ["code"],
    }, timeout=PYTHON_SECONDS + 15)
    def python(self, code: str) -> str:
        # Reading a file by name in a program counts as opening it (the files_read signal).
        self._opened.update(name for name in self._docs if name in code)
        from jointrl.envs.sandbox import PYTHON, Limits, Sandbox

        if self._sandbox is None:
            limits = Limits(wall_seconds=PYTHON_SECONDS, cpu_seconds=int(PYTHON_SECONDS), output_bytes=PYTHON_OUTPUT_BYTES)
            self._sandbox = Sandbox(limits=limits, files={name: self.file_bytes(name) for name in self._docs})
        # The sandbox's interpreter (with the document libraries) by absolute path; the program goes in on
        # stdin, so its length is not bound by the argument limit and no file is left behind.
        return self._sandbox.run([PYTHON, "-"], stdin=code).text()

    # Contract.

    def step(self, tool_call: dict):
        result = super().step(tool_call)
        # The scripted solution reads what each of its calls returned from here.
        self._last_output = result.content
        return result

    def _signals(self) -> dict[str, float]:
        gold = self.task.gold
        correct = matching.matches(self.final_answer, gold)
        # Only the reply's tail is graded (matching.MAX_REPLY_CHARS); reading all of a huge reply would be slow.
        reply = (self.final_answer or "")[-matching.MAX_REPLY_CHARS:]
        parsed = bool(matching.normalise(reply)) if gold.is_text else matching.parse_number(reply) is not None
        needed = set(self.task.needed)
        return {
            "success": float(correct),
            "answer_correct": float(correct),
            "answer_parsed": float(parsed),
            "files_read": len(needed & self._opened) / len(needed),
            "hack_several_answers": float(matching.several_answers(self.final_answer, gold)),
        }

    def _solution(self) -> Iterator[Action]:
        yield Action("list_files", {}, reasoning="First see which documents the workspace holds.")
        evidence, done = Evidence(), set()
        for read in self.task.reads:
            if read.page is not None:
                yield from self._read_page(read, evidence)
                continue
            key = (read.file, read.sheet)
            if key in done:
                continue
            done.add(key)
            if read.tool == "read_xlsx":
                arguments = {"file": read.file, "sheet": read.sheet}
                yield Action("read_xlsx", arguments, reasoning=read.why)
                evidence.add("read_xlsx", arguments, self._last_output)
                continue
            page, pages = 1, 1
            while page <= pages:
                arguments = {"file": read.file, "page": page}
                yield Action(read.tool, arguments, reasoning=read.why if page == 1 else f"Read on: page {page} of {pages}.")
                evidence.add(read.tool, arguments, self._last_output)
                pages = int(PAGE_OF.search(self._last_output.split("\n", 1)[0]).group(1))
                page += 1
        value, steps = self.task.solve(evidence)
        answer = self.task.gold.render(value)
        yield Action(None, answer=answer, reasoning=f"From what I read: {steps}. So the answer is {answer}.")

    def _read_page(self, read: Read, evidence: Evidence) -> Iterator[Action]:
        """One page of a long document; a section is looked up in page 1's contents, read first if need be."""
        read_pages = evidence.pages.setdefault(read.file, {})
        page = read.page
        if isinstance(page, str):
            if 1 not in read_pages:
                arguments = {"file": read.file, "page": 1}
                yield Action(read.tool, arguments, reasoning=f"Page 1 of {read.file} lists where each section is.")
                evidence.add(read.tool, arguments, self._last_output)
            page = long_documents.section_page(read_pages[1], page)
        if page not in read_pages:
            arguments = {"file": read.file, "page": page}
            yield Action(read.tool, arguments, reasoning=read.why)
            evidence.add(read.tool, arguments, self._last_output)

    def close(self) -> None:
        if self._sandbox is not None:
            sandbox, self._sandbox = self._sandbox, None
            sandbox.close()
