"""Long-term memory and knowledge survive rescaling (issue 16).

A job at parallelism 2 remembers notes per key and teaches shared facts; it is stopped with a
savepoint and restored at parallelism 3, where it adds more, then stopped again and restored
at parallelism 1. After every phase each key recalls all of its notes (``search`` finds
each one by a question about it, ``get_recent`` returns all of them) and every key finds
every fact, whichever subtask wrote it. Default configuration (the embedded store under the
data directory), in PyFlink's process mode, the demanding one: every subtask is a Python
process of its own, and they all use the machine's one store (the first to open it serves
the others), whichever keys Flink gives them.

Each phase is a job of its own in a child process (``rescale_job.py``), fed batch by batch
through a continuously monitored directory so that it is still running when its savepoint
is taken. The agent also counts each key's operations in short-term memory (Flink keyed
state): that count coming through the rescale shows the savepoint was taken and restored
onto the agent operator, so a failure of the recall checks is the store's, not the
harness's. The action log keeps its default (SQLite under the data directory, a fresh job
name per submission): no run is in flight when a savepoint is taken, so no replay crosses a
submission, and memory ids include the job name, so a later phase cannot overwrite an
earlier phase's items.

The same operations on the local runner (one store, one process) are the control: they
show that what the Flink test expects is what the agent finds when nothing is partitioned.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flink_agents.runtime import AgentOptions, LocalRunner
from flink_agents.runtime.flink import read_json_files
from tests.children import run_child_job
from tests.memory.long_term.rescale_agents import RescaleAgent

NOTES = {  # key -> [(note, a question that should find it)], remembered in this order
    "ana": [
        ("I have a grey cat called Miso.", "What is the name of her cat?"),
        ("I live in Lisbon, close to the river.", "Which Portuguese city is her home?"),
        (
            "On weekends I go bouldering at an indoor climbing gym.",
            "What sport does she do on weekends?",
        ),
    ],
    "bo": [
        ("My dog Rex is a golden retriever.", "What breed is his dog?"),
        ("My flat is in Oslo, near the harbour.", "Which Norwegian city does he live in?"),
        ("I play the cello in a community orchestra.", "Which musical instrument does he play?"),
    ],
    "carla": [
        ("I keep two goldfish in a tank in the kitchen.", "What fish does she keep?"),
        ("Home for me is a village outside Valencia.", "Which Spanish region is her home?"),
        ("I paint watercolour landscapes in my spare time.", "What kind of art does she make?"),
    ],
    "dev": [
        ("A parrot named Kiwi shares my apartment.", "What bird lives with him?"),
        ("I moved to Toronto last spring.", "Which Canadian city did he move to?"),
        ("I spend my evenings playing chess online.", "Which board game does he play?"),
    ],
    "emil": [
        ("My rabbit Hoppel sleeps under the sofa.", "Where does his rabbit sleep?"),
        ("I grew up and still live in Hamburg.", "Which German city is his hometown?"),
        ("I run marathons as a hobby.", "What long-distance races does he take part in?"),
    ],
    "fatima": [
        ("Our family has a tortoise that is forty years old.", "How old is the family tortoise?"),
        ("We live in a house in Marrakesh.", "Which Moroccan city does she live in?"),
        ("Knitting scarves is how I relax.", "What does she knit?"),
    ],
    "goran": [
        ("I look after my horse at a stable.", "Where does he keep his horse?"),
        ("My apartment is in Zagreb.", "Which Croatian city is his apartment in?"),
        ("I brew my own beer on Sundays.", "What drink does he make himself?"),
    ],
    "hana": [
        ("I have a hamster called Mochi.", "What is her hamster's name?"),
        ("I live in Osaka with my sister.", "Which Japanese city does she live in?"),
        ("I practise calligraphy with ink and brush.", "What does she write with ink and a brush?"),
    ],
    "ivan": [
        ("Two black cats rule my house.", "What colour are his cats?"),
        ("I am based in Saint Petersburg.", "Which Russian city is he based in?"),
        ("I repair old motorcycles for fun.", "What vehicles does he fix?"),
    ],
    "jun": [
        ("My pet snake eats one mouse a week.", "What does his snake eat?"),
        ("I live in Seoul near the university.", "Which Korean city does he live in?"),
        ("I sing karaoke with friends every Friday.", "What does he sing on Fridays?"),
    ],
    "kofi": [
        ("My dog Bingo loves chasing footballs.", "What does his dog like to chase?"),
        ("Accra is where I live and work.", "Which city in Ghana does he live in?"),
        ("I play drums in a jazz band.", "Which percussion instrument does he play?"),
    ],
    "lena": [
        ("I feed a stray cat that visits my balcony.", "Which animal visits her balcony?"),
        (
            "My home is a small cottage in the Scottish Highlands.",
            "In which part of Scotland is her cottage?",
        ),
        ("I go birdwatching at dawn.", "Which animals does she watch early in the morning?"),
    ],
}
KEYS = list(NOTES)
FACTS = {  # question -> fact, taught in this order, by different keys
    "Where does that big German river end?": "The Rhine flows into the North Sea.",
    "What makes sourdough rise?": "Sourdough bread rises thanks to wild yeast.",
    "Which peak is the tallest in the world?": "Mount Everest is the highest mountain on Earth.",
    "How do bees tell each other where flowers are?": (
        "Honey bees dance to show each other where flowers are."
    ),
}
FACT_QUERIES = list(FACTS)


@dataclass(frozen=True)
class Phase:
    """A job at ``parallelism`` running ``batches`` of records, one after the other."""

    parallelism: int
    batches: list[list[dict[str, Any]]]


def writes(phase: int, notes: range, facts: list[str]) -> list[dict[str, Any]]:
    """Each key remembers its ``notes`` (by index); the ``facts`` questions' facts are
    taught, each by another key."""
    records = [
        {"id": f"{phase}-{key}-{n}", "key": key, "op": "remember", "text": NOTES[key][n][0]}
        for n in notes
        for key in KEYS
    ]
    for question in facts:
        teacher = KEYS[(5 * FACT_QUERIES.index(question)) % len(KEYS)]
        records.append(
            {
                "id": f"{phase}-fact-{question}",
                "key": teacher,
                "op": "know",
                "text": FACTS[question],
            }
        )
    return records


def recalls(phase: int, notes: range, facts: list[str]) -> list[dict[str, Any]]:
    """Every key asks the question of each of its ``notes``, for its recent notes, and the
    ``facts`` questions."""
    return [
        {
            "id": f"{phase}-recall-{key}",
            "key": key,
            "op": "recall",
            "queries": [NOTES[key][n][1] for n in notes],
            "fact_queries": facts,
            "n": 10,
        }
        for key in KEYS
    ]


PHASES = [
    Phase(2, [writes(1, range(2), FACT_QUERIES[:3]), recalls(1, range(2), FACT_QUERIES[:3])]),
    Phase(3, [writes(2, range(2, 3), FACT_QUERIES[3:]), recalls(2, range(3), FACT_QUERIES)]),
    Phase(1, [recalls(3, range(3), FACT_QUERIES)]),
]
RECORDS = [record for phase in PHASES for batch in phase.batches for record in batch]


def expected_answers() -> dict[str, dict[str, Any]]:
    """Each recall's answer by record id: the note of each question asked (all of them, in
    ``recent`` too), the fact for each question, and the key's operations so far."""
    ops: Counter[str] = Counter()
    expected = {}
    for record in RECORDS:
        key = record["key"]
        ops[key] += 1
        if record["op"] == "recall":
            answers = {question: note for note, question in NOTES[key]}
            notes = {question: answers[question] for question in record["queries"]}
            expected[record["id"]] = {
                "id": record["id"],
                "key": key,
                "ops": ops[key],
                "searched": notes,
                "recent": sorted(notes.values()),
                "facts": {question: FACTS[question] for question in record["fact_queries"]},
            }
    return expected


def recall_answers(answers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The recall answers by id, ``recent`` sorted (its order across phases is not asked)."""
    found = {}
    for answer in answers:
        if "searched" in answer:
            recent = answer["recent"]
            found[answer["id"]] = {**answer, "recent": None if recent is None else sorted(recent)}
    return found


def problems(found: dict[str, dict[str, Any]], parallelism_of: dict[str, int]) -> list[str]:
    """What each recall missed, one line per recall that missed anything: the notes that
    ``search`` did not find by their question or ``get_recent`` did not return, and the
    facts ``search`` did not find (None: the set itself was not found)."""
    lines = []
    for record_id, want in expected_answers().items():
        got = found[record_id]
        missed = {
            "search": _missed(want["searched"], got["searched"]),
            "get_recent": _missed_items(want["recent"], got["recent"]),
            "knowledge": _missed(want["facts"], got["facts"]),
        }
        if any(missed.values()):
            where = f"parallelism {parallelism_of[record_id]}, key {want['key']}"
            lines.append(
                f"{where}: " + "; ".join(f"{k} missed {v}" for k, v in missed.items() if v)
            )
    return lines


def _missed(want: dict[str, str], got: dict[str, Any] | None) -> list[str] | None:
    """The expected answers not found by their question; None if nothing could be asked."""
    if got is None:
        return None if not want else ["(no such set)", *want.values()]
    return [answer for question, answer in want.items() if got.get(question) != answer]


def _missed_items(want: list[str], got: list[str] | None) -> list[str]:
    """The expected items ``got`` lacks, and anything it holds besides."""
    if got is None:
        return ["(no such set)", *want]
    return sorted(set(want) - set(got)) + [
        f"(unexpected) {item}" for item in got if item not in want
    ]


def run_phase(
    tmp_path: Path, index: int, phase: Phase, mode: str, savepoint: str | None
) -> str | None:
    """Run one phase's job in a child process; the savepoint it was stopped with."""
    last = index == len(PHASES) - 1
    spec = {
        "mode": mode,
        "parallelism": phase.parallelism,
        "savepoint": savepoint,
        "savepoint_dir": (tmp_path / "savepoints").as_uri(),
        "stop": "cancel" if last else "savepoint",
        "input_dir": str(tmp_path / "input"),
        "output_dir": str(tmp_path / "answers"),
        "data_dir": str(tmp_path / "data"),
        "batches": [
            {"file": f"phase-{index + 1}-batch-{n}.jsonl", "records": batch}
            for n, batch in enumerate(phase.batches)
        ],
    }
    spec_file = tmp_path / f"phase-{index + 1}.json"
    spec_file.write_text(json.dumps(spec))
    what = f"phase {index + 1} (parallelism {phase.parallelism})"
    saved = run_child_job("tests.memory.long_term.rescale_job", spec_file, what)["savepoint"]
    if not last and not saved:
        pytest.fail(f"phase {index + 1} was stopped without a savepoint")
    return saved


@pytest.mark.slow
@pytest.mark.flink
@pytest.mark.parametrize(
    "mode",
    # Process mode: each subtask a Python process of its own, one store for all of them.
    # (Thread mode, where the subtasks share one process and its store, ran here too until
    # the CI's 30 minutes ran short: the local-runner control below is that case's
    # expectation, and the parity suite runs long-term memory in both modes.)
    ["process"],
)
def test_memories_and_knowledge_survive_rescaling(mode, tmp_path):
    (tmp_path / "input").mkdir()
    savepoint = None
    parallelism_of = {}
    for index, phase in enumerate(PHASES):
        savepoint = run_phase(tmp_path, index, phase, mode, savepoint)
        for batch in phase.batches:
            parallelism_of.update((record["id"], phase.parallelism) for record in batch)
    answers = read_json_files(tmp_path / "answers")
    found = recall_answers(answers)
    want = expected_answers()
    # The harness: every record answered once, and each key's operation count (Flink keyed
    # state) carried through both savepoints onto whichever subtask owns the key now.
    if sorted(a["id"] for a in answers) != sorted(r["id"] for r in RECORDS):
        pytest.fail(f"answers are missing or repeated: {sorted(a['id'] for a in answers)}")
    counts = {i: (found[i]["ops"], w["ops"]) for i, w in want.items()}
    if any(got != expected for got, expected in counts.values()):
        pytest.fail(f"short-term memory did not survive the rescale (got, expected): {counts}")
    # What the issue is about: every key still recalls each of its notes, and every fact.
    missed = problems(found, parallelism_of)
    assert not missed, "\n".join(missed)


def test_the_local_runner_recalls_everything(tmp_path):
    """The control: all phases' records on the local runner (one store, one process) give
    exactly the answers the Flink test expects. Batch by batch, as the Flink phases feed
    them: a key's run parks until its items are stored, so within one batch another key's
    recall may run before a fact taught later in the batch."""
    runner = LocalRunner(RescaleAgent, options=AgentOptions(data_dir=str(tmp_path / "data")))
    answers = []
    try:
        for phase in PHASES:
            for batch in phase.batches:
                for record in batch:
                    answers += runner.feed(record["key"], record)
                answers += runner.finish()
    finally:
        runner.engine.close()
    assert recall_answers(answers) == expected_answers()
