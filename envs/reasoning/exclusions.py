"""The reasoning-gym datasets, and the hard-config knobs, that the reasoning domain leaves out, each with its reason.

The reasons were measured with `python -m jointrl.envs.reasoning.audit` (reasoning-gym 0.1.25, CPU time
on one core); tests check that every name here still exists upstream, so a stale entry fails loudly.
"""
from __future__ import annotations

# Whole datasets: no id is registered for them.
EXCLUDED_DATASETS: dict[str, str] = {
    "composite": "a weighted mixture of other datasets, configured with a list of them; not a task of its own",
    "boxnet": "ships neither a reference answer nor a worked solution (its verifier simulates plans), so no demo exists",
    "rush_hour": "ships neither a reference answer nor a worked solution (its verifier replays moves), so no demo exists",
    "list_functions": "one of its generators draws from the global `random` module, so an entry is not a function of its seed",
    "isomorphic_strings": "the question depends on the process's string hash seed (set order): one seed, different tasks per worker",
    "polynomial_multiplication": "the question depends on the process's string hash seed (set order): one seed, different tasks per worker",
    "ransom_note": "the question depends on the process's string hash seed (set order): one seed, different tasks per worker",
    "codeio": "generating an entry executes code snippets from its data file in this process (its own docstring warns of them)",
    "game_of_life_halting": "its verifier compares bool(answer) with bool(reference): any non-empty text, even 'False', scores 1.0",
    "knight_swap": "a reset takes 0.57 s on average (a solver search), over the 0.2 s budget",
}

# Curriculum knobs (reasoning-gym attribute names) that the hard rule in hardness.py would move but that stay at
# their defaults. A dataset whose every movable knob is listed here has no hard variant.
FROZEN_KNOBS: dict[str, dict[str, str]] = {
    "caesar_cipher": {"rotation": "the config accepts rotations 1-25 only; the next level is 50"},
    "countdown": {"target": "targets of 500-1000 often have no expression: generation fails after 100 attempts"},
    "futoshiki": {"board_size": "boards of 7-9 take 0.39 s per reset on average"},
    "jugs": {"num_jugs": "with 4 jugs 2 of 10 seeds ship a solution their own verifier rejects; with difficulty 15 a reset takes 0.37 s"},
    "letter_jumble": {"word_len": "the curriculum's next range (50-64 letters) holds no words: generation fails"},
    "puzzle24": {"value": "four numbers drawn from 9-10 rarely make 24: generation does not finish"},
    "rubiks_cube": {"cube_size": "the worked solution exists only for 3x3 cubes; a 4x4 entry ships none"},
    "sokoban": {"width": "boards 10-11 wide take seconds to generate for some seeds"},
    "sudoku": {"empty": "puzzles with 50-60 empty cells take seconds to generate (unique-solution search)"},
    "word_ladder": {"word_length": "words of 4-5 letters build two word graphs per reset: 0.24 s"},
    "zebra_puzzles": {"num_people": "5 people take 0.28 s per reset (0.49 s together with 5 characteristics)"},
}
