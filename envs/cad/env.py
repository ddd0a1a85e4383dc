"""The CAD environments: the model writes CSG programs, runs them in the sandbox, measures and submits the part.

The submission is scored by IoU, bodies and genus, and each feature's own region (`verify`). The long-horizon
variant gives the part's features as drawing notes, read one at a time.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import manifold3d

from jointrl.envs.base import Action, Env, ToolFailure, ToolResult, tool
from jointrl.envs.cad import kit
from jointrl.envs.cad.kit import mesh_io
from jointrl.envs.cad.families import check, make_part
from jointrl.envs.cad.measure import measure as measure_solid
from jointrl.envs.cad.part import Part
from jointrl.envs.cad.prompt import system_message, user_message
from jointrl.envs.cad.verify import score
from jointrl.envs.sandbox import PYTHON, Limits, Sandbox

PROGRAM_FILE = "program.py"
MAX_CODE_CHARS = 20_000
MAX_OUTPUT_CHARS = 4_000
# Booleans run on one thread per core, and each thread counts as a process and reserves address space;
# single-threaded BLAS and two malloc arenas keep a program on a many-core host inside the limits.
LIMITS = Limits(wall_seconds=30.0, cpu_seconds=30, memory_bytes=2 << 30, processes=256, output_bytes=16 << 10)
PROGRAM_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}


def _clip(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters not shown ...]\n{text[-half:]}"


class CadEnv(Env):
    """One CAD episode: build the described part with a CSG program; the submitted solid is scored against the target."""

    def __init__(self, difficulty: str = "easy", family: str = "plate", **kwargs):
        check(family, difficulty)
        super().__init__(difficulty=difficulty, **kwargs)
        self.family = family
        self.part: Part | None = None
        self._sandbox: Sandbox | None = None
        self._clear()

    def _clear(self) -> None:
        self.mesh: manifold3d.Manifold | None = None  # the last valid part a program saved
        self.mesh_error: str | None = None  # why the last saved part was rejected, when it was
        self.submitted: manifold3d.Manifold | None = None
        self.program_runs = 0

    def _reset(self, seed: int) -> list[dict]:
        self.close()
        self._clear()
        self.part = make_part(self.family, self.difficulty, seed)
        return [{"role": "system", "content": system_message()}, {"role": "user", "content": user_message(self.part.text)}]

    def task_key(self) -> str:
        """The part's parameters: a held-out seed that draws a train seed's part repeats a memorisable task."""
        assert self.part is not None, "reset() comes before task_key()"
        return self.part.key()

    def _box(self) -> Sandbox:
        # Made on first use: an episode that never runs a program never pays for a workspace.
        if self._sandbox is None:
            self._sandbox = Sandbox(LIMITS, packages={kit.KIT: Path(kit.__file__).parent})
        return self._sandbox

    @tool("Write `code` to program.py and run it with Python in the sandbox; reports its output and whether it saved a valid part.",
          {"type": "object", "properties": {"code": {"type": "string", "minLength": 1, "maxLength": MAX_CODE_CHARS,
                                                     "description": "A complete Python program that builds the part and calls save(part)."}},
           "required": ["code"]},
          timeout=2 * LIMITS.wall_seconds)
    def run_program(self, code: str) -> str:
        box = self._box()
        box.write(PROGRAM_FILE, code)
        # Drop the previous run's file so that "saved" below means saved by this run. A symlink is removed
        # itself, never followed.
        stale = box.workspace / mesh_io.MESH_FILE
        if stale.is_symlink() or stale.is_file():
            stale.unlink()
        result = box.run([PYTHON, PROGRAM_FILE], env=PROGRAM_ENV)
        self.program_runs += 1
        return _clip(result.text()) + "\n" + self._collect_part(box)

    def _collect_part(self, box: Sandbox) -> str:
        try:
            if not box.exists(mesh_io.MESH_FILE):
                kept = " The part saved earlier is still the current one." if self.mesh is not None else ""
                return f"No part was saved by this run (call save(part) to write {mesh_io.MESH_FILE}).{kept}"
            self.mesh = mesh_io.read(box.read(mesh_io.MESH_FILE))
            self.mesh_error = None
        # The sandbox's reads refuse links out of the workspace and non-files with ValueError.
        except (mesh_io.MeshError, ValueError, OSError) as err:
            self.mesh, self.mesh_error = None, str(err)
            return f"{mesh_io.MESH_FILE} was written but is not a valid solid: {err}"
        return f"Saved a valid solid: {self.mesh.num_tri()} triangles, volume {self.mesh.volume():.2f} mm^3."

    @tool("Measure the last saved part: validity, volume, bounding box, number of bodies, genus (through-holes).")
    def measure(self) -> str:
        if self.mesh is None:
            if self.mesh_error is not None:
                return f"valid: no ({self.mesh_error})"
            raise ToolFailure("no part has been saved yet: run a program that calls save(part)")
        return "valid: yes (closed 2-manifold solid)\n" + measure_solid(self.mesh).report()

    @tool("Submit the last saved part as the answer; this ends the episode.")
    def submit(self) -> ToolResult:
        if self.submitted is not None:
            raise ToolFailure("a part has already been submitted")
        if self.mesh is None:
            why = f" (the last saved part is invalid: {self.mesh_error})" if self.mesh_error else ""
            raise ToolFailure(f"there is no valid saved part to submit{why}")
        self.submitted = self.mesh
        return ToolResult(f"Submitted the part (volume {self.submitted.volume():.2f} mm^3).", done=True)

    def _signals(self) -> dict[str, float]:
        facts = {"valid": float(self.mesh is not None), "submitted": float(self.submitted is not None),
                 "program_runs": float(self.program_runs)}
        if self.part is None:
            return {**score(None, None), **facts}
        scored = score(self.part, self.submitted)
        # The per-feature signals stay last: a cap on the number of signals drops those first.
        summary = {k: v for k, v in scored.items() if not k.startswith("feature/")}
        return {**summary, **facts, **{k: v for k, v in scored.items() if k.startswith("feature/")}}

    def _solution(self) -> Iterator[Action]:
        assert self.part is not None, "reset() comes before demo()"
        yield Action("run_program", {"code": self.part.program},
                     reasoning="Build the part from primitives placed as the description gives them: union the solid "
                               "pieces, subtract every hole and cut with cutters that overshoot the faces they open, "
                               "then save it.")
        yield from self._check_and_submit()

    def _check_and_submit(self) -> Iterator[Action]:
        yield Action("measure", reasoning="Check the saved solid's extents, volume and hole count before handing it in.")
        m = measure_solid(self.mesh)
        lo, hi = (", ".join(f"{c:g}" for c in (round(v, 2) for v in corner)) for corner in (m.bbox_min, m.bbox_max))
        bodies = "1 body" if m.components == 1 else f"{m.components} bodies"
        yield Action("submit", reasoning=f"The bounding box runs from ({lo}) to ({hi}) as specified, and {bodies} with "
                                         f"genus {m.genus} matches the through-holes described. Submitting.")
        yield Action(None, answer=f"Submitted the {self.family} part: one solid of {m.volume:.1f} mm^3.")

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


class DrawingCadEnv(CadEnv):
    """The long-horizon CAD episode: the part's features are numbered drawing notes, read one at a time with a tool."""

    def __init__(self, difficulty: str = "long", family: str = "fixture", **kwargs):
        super().__init__(difficulty=difficulty, family=family, **kwargs)

    @tool("Read one numbered note of the drawing: the feature it adds to or removes from the part.",
          {"type": "object", "properties": {"number": {"type": "integer", "minimum": 1, "description": "The note's number."}},
           "required": ["number"]})
    def read_note(self, number: int) -> str:
        assert self.part is not None, "reset() comes before tools"
        if not 1 <= number <= len(self.part.notes):
            raise ToolFailure(f"the drawing has notes 1 to {len(self.part.notes)}; there is no note {number}")
        return self.part.notes[number - 1]

    def _solution(self) -> Iterator[Action]:
        assert self.part is not None, "reset() comes before demo()"
        stock, *steps = self.part.steps
        yield Action("run_program", {"code": stock},
                     reasoning="Start from the stock block and keep it in a work file, so that each later run applies "
                               "one note to the part the run before it kept, and a mistake shows up at its own note.")
        for number, step in enumerate(steps, start=1):
            yield Action("read_note", {"number": number}, reasoning=f"Read note {number} of the drawing.")
            yield Action("run_program", {"code": step},
                         reasoning=f"Apply note {number}: load the part kept so far, add or cut this feature at the "
                                   f"position the note gives, and save it again.")
        yield from self._check_and_submit()
