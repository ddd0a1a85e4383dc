"""The reasoning-gym datasets, and the hard-config knobs, that the reasoning domain leaves out, each with its reason.

The reasons were measured with `python -m jointrl.envs.reasoning.audit` (reasoning-gym 0.1.25, CPU time
on one core) or, for shortcuts, with `jointrl envs audit` over 10 train and 10 held-out seeds (a rate is the
share of held-out seeds the shortcut solves; "memorised" is the no_tools column, train seed i's answer given
to held-out seed i). A dataset whose answers are too narrow to spread (balance.py needs every one of 23
buckets reachable) is excluded rather than balanced. Tests check that every name here still exists upstream,
so a stale entry fails loudly.
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
    "propositional_logic": "any weakening of a premise is a valid conclusion: the constant '(Q ∨ P)' passes 1.00 (hard '(¬Q ∨ R)' 0.70)",
    "coin_flip": "a few hundred distinct questions: held-out overlap 0.10 (hard 0.20) at 20 seeds; upstream also passed '0' on 1.00",
    "count_bits": "bit counts of random numbers cluster around 16: constant '16' 0.20, memorised 0.20; too narrow to spread",
    "gcd": "most gcds are 1: constant '1' 0.30 (hard 0.40), memorised 0.50 on hard; too skewed to spread",
    "aiw": "small counts: constant '2' 0.10 (hard '9' 0.10), memorised 0.10; too narrow to spread",
    "binary_alternation": "small swap counts: memorised 0.10 (both variants); too narrow to spread",
    "letter_counting": "small counts: constant '1' 0.40, memorised 0.20; too narrow to spread",
    "maze": "short path lengths: constant '10' 0.20 and memorised 0.30 on hard, '7' 0.10 on default; too narrow to spread",
    "rectangle_count": "small counts: memorised 0.20 (hard 0.10); too narrow to spread",
    "rotten_oranges": "'-1' (oranges that never rot) passes 0.70 on hard, memorised 0.50; too narrow to spread",
    "self_reference": "answers 0-7: constant '2' 0.50, memorised 0.30 (both variants)",
    "zebra_puzzles": "the answer is one of a few names: constant 'arnold' 0.30, memorised 0.20 (both variants); a reset takes 0.2-0.4 s",
    "graph_color": "many colourings are right and sparse graphs accept a fixed one: constant colouring 0.30",
    "family_relationships": "a couple of dozen relation words: memorised 0.30 ('son'); too few to spread over 23 buckets",
    "polynomial_equations": "'0' is a root of most equations: constant '0' 0.60; spreading the answers needs ~23 sympy draws (9 s a reset)",
    "tower_of_hanoi": "default boards repeat: held-out overlap 0.30",
    "word_ladder": "its shipped ladder (the demo answer) depends on the process's string hash seed: the audit's determinism check fails",
}

# Curriculum knobs (reasoning-gym attribute names) that the hard rule in hardness.py would move but that stay at
# their defaults. A dataset whose every movable knob is listed here has no hard variant.
FROZEN_KNOBS: dict[str, dict[str, str]] = {
    "bf": {"difficulty": "a difficulty-2 entry takes 0.27 s to generate, and its outputs cluster: constant '24' 0.10"},
    "caesar_cipher": {"rotation": "the config accepts rotations 1-25 only; the next level is 50"},
    "countdown": {"target": "targets of 500-1000 often have no expression: generation fails after 100 attempts"},
    "futoshiki": {"board_size": "boards of 7-9 take 0.39 s per reset on average"},
    "game_of_life": {
        knob: "the hard boards die out: the empty board is the answer on 1.00 of held-out seeds"
        for knob in ("grid_size_x", "grid_size_y", "filled_cells_weights", "simulation_steps")
    },
    "jugs": {"num_jugs": "with 4 jugs 2 of 10 seeds ship a solution their own verifier rejects; with difficulty 15 a reset takes 0.37 s"},
    "letter_jumble": {"word_len": "the curriculum's next range (50-64 letters) holds no words: generation fails"},
    "number_sequence": {
        knob: "constant '0' passes 0.20; spreading its answers needs ~23 entries a reset at 0.1-0.7 s each"
        for knob in ("terms", "min_value", "max_value", "max_complexity")
    },
    "puzzle24": {"value": "four numbers drawn from 9-10 rarely make 24: generation does not finish"},
    "rubiks_cube": {"cube_size": "the worked solution exists only for 3x3 cubes; a 4x4 entry ships none"},
    "sokoban": {"width": "boards 10-11 wide take seconds to generate for some seeds"},
    "sudoku": {"empty": "puzzles with 50-60 empty cells take seconds to generate (unique-solution search)"},
    "word_ladder": {"word_length": "words of 4-5 letters build two word graphs per reset: 0.24 s"},
    "zebra_puzzles": {"num_people": "5 people take 0.28 s per reset (0.49 s together with 5 characteristics)"},
}
