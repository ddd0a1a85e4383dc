"""reasoning-gym access: draw the entry for a seed, find its reference answer, and score answers with the dataset's verifier.

Importing this module imports reasoning-gym (about a second), so only the env class imports it, in the
process that plays the episode; registering ids never does.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import random
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from reasoning_gym.dataset import ProceduralDataset
from reasoning_gym.factory import DATASETS, create_dataset

from jointrl.envs.reasoning import balance
from jointrl.envs.reasoning.verifiers import VERIFIERS

# Datasets whose construction parses a data file while each item depends only on Random(seed + index): one
# instance built at seed 0 serves every seed as an index, which yields exactly the entry a fresh instance
# built at that seed gives at index 0 (a test checks this equivalence).
INDEXED = frozenset({"arc_agi", "figlet_font", "group_anagrams", "spell_backward"})
# Datasets with many right answers ship no single answer (entry["answer"] is None) but a worked solution
# in the entry's metadata; the demo plays that, serialised the way the verifier parses it.
SOLUTION_KEYS = {
    "graph_color": "possible_answer",
    "propositional_logic": "example_answer",
    "rubiks_cube": "example_correct_answer",
}
# How many entries a seed may pass over before the dataset is declared broken for its config.
MAX_DRAWS = 16
_VIRTUAL_SIZE = 2**62


@dataclass
class Draw:
    """The entry chosen for a seed, the dataset instance that scores it, and its checked reference answer."""

    dataset: ProceduralDataset
    entry: dict  # reasoning-gym entry: question, answer, metadata
    reference: str  # an answer the dataset's own verifier scores 1.0
    attempts: int  # entries passed over before this one (0 almost always)


def check(name: str, config: dict[str, Any]) -> None:
    """Raise ValueError naming the problem unless reasoning-gym has this dataset and accepts the config overrides."""
    if name not in DATASETS:
        raise ValueError(f"reasoning-gym has no dataset {name!r}")
    config_cls = DATASETS[name][1]
    try:
        overridden = config_cls(**config)
        if hasattr(overridden, "validate"):
            overridden.validate()
    except (AssertionError, TypeError, ValueError) as err:
        raise ValueError(f"reasoning-gym dataset {name!r} rejects config {config}: {err}") from err


@contextlib.contextmanager
def _contained():
    # Generators and verifiers print progress (bf's optimiser prints dots), warn while parsing answers
    # (pool_matrix's numpy parser on an empty one) and reseed numpy's global RNG (pool_matrix): keep all
    # of it out of the process that hosts the env. Like the state it guards, this is process-wide.
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


@functools.lru_cache(maxsize=64)
def _indexed_dataset(name: str, config_json: str) -> ProceduralDataset:
    return create_dataset(name, seed=0, size=_VIRTUAL_SIZE, **json.loads(config_json))


def make_entry(name: str, config: dict[str, Any], dataset_seed: int) -> tuple[ProceduralDataset, dict]:
    """reasoning-gym's own entry for a dataset seed (index 0 of the dataset built at that seed), with its dataset."""
    with _contained():
        if name in INDEXED:
            dataset = _indexed_dataset(name, json.dumps(config, sort_keys=True))
            return dataset, dataset[dataset_seed]
        dataset = create_dataset(name, seed=dataset_seed, size=1, **config)
        return dataset, dataset[0]


def reference_answer(name: str, entry: dict) -> str | None:
    """The answer the dataset itself gives for an entry, as the text a model would send (None if it gives none)."""
    answer = entry["answer"]
    if answer is None and name in SOLUTION_KEYS:
        answer = entry["metadata"].get(SOLUTION_KEYS[name])
    if answer is None or isinstance(answer, str):
        return answer
    return json.dumps(answer)


def score(dataset: ProceduralDataset, answer: str, entry: dict) -> float:
    """The verifier score of `answer` (1.0 = fully correct): ours where verifiers.py has one, else the dataset's own.

    Raises whatever the verifier raises.
    """
    ours = VERIFIERS.get(entry["metadata"].get("source_dataset", ""))
    if ours is not None:
        return float(ours(answer, entry))
    with _contained():
        return float(dataset.score_answer(answer, entry))


def dataset_seed(seed: int, attempt: int) -> int:
    """The dataset seed of a seed's n-th draw: the seed itself first, then hashed values (stable across processes)."""
    if attempt == 0:
        return seed
    digest = hashlib.sha256(f"{seed}/{attempt}".encode()).digest()
    # Below 2**31: some generators seed numpy, which takes 32-bit seeds only.
    return int.from_bytes(digest[:4], "big") >> 1


def draw(name: str, config: dict[str, Any], seed: int) -> Draw:
    """The entry for `seed`: the first draw whose reference answer is non-empty, fits the seed (balance.py), scores
    1.0, and beats the empty answer.

    A few generators now and then give up on a dataset seed (countdown finds no expression) or emit an entry
    whose shipped answer is blank (the no-op answer would solve it) or fails their own verifier; such an
    entry cannot be played or demonstrated, so the seed moves on to its next draw. The choice depends only
    on the seed, so every process picks the same entry.

    A balanced seed whose choice or bucket no draw hits (a rare bucket, about 0.7% of the seeds that want
    it) takes the first playable entry it passed over: a task, where raising would fail the reset; the
    balance is off for that one seed only.
    """
    check(name, config)
    problem = ""
    passed_over: Draw | None = None
    draws = balance.MAX_DRAWS if balance.balanced(name) else MAX_DRAWS
    for attempt in range(draws):
        try:
            dataset, entry = make_entry(name, config, dataset_seed(seed, attempt))
        except (AssertionError, IndexError, RuntimeError, ValueError) as err:
            problem = f"the generator raised {type(err).__name__}: {err}"
            continue
        reference = reference_answer(name, entry)
        if not reference or not reference.strip():
            problem = "the reference answer is missing or blank"
            continue
        fits = balance.fits(name, seed, reference)
        # A degenerate answer is what balancing exists to avoid, so it is never the fallback; once there is
        # a fallback, entries that do not fit are not worth scoring.
        if not fits and (passed_over is not None or name in balance.DEGENERATE):
            problem = "the reference answer is not the seed's choice or in its bucket, or is degenerate"
        elif score(dataset, reference, entry) < 1.0:
            problem = "the verifier rejects the reference answer"
        elif score(dataset, "", entry) >= 1.0:
            problem = "the verifier accepts the empty answer"
        elif fits:
            return Draw(dataset=dataset, entry=entry, reference=reference, attempts=attempt)
        else:
            passed_over = Draw(dataset=dataset, entry=entry, reference=reference, attempts=attempt)
            problem = "the reference answer is not the seed's choice or in its bucket"
    if passed_over is not None:
        return passed_over
    raise RuntimeError(
        f"reasoning-gym dataset {name!r}, seed {seed}: no playable entry in {draws} draws; the last: {problem} "
        f"(config {config})"
    )
