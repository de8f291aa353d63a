"""Writes this example's data: 50 English passages, each translated into German by four systems
(200 items), and ``humans.csv``: a human MQM score for 25 items of each system, drawn at random.

The demo's fake server has a truth for every prompt (the errors a perfect judge would find, which
its simulated judges read with their own noise: ``judge_engine.fake.persona``). The human score is
that truth's MQM score with, for two systems, the errors people find and an automatic judge tends
to miss (-2 per item for ``m2m``, -1 for ``nllb``: a literal rendering reads as fluent). So the
judge's raw means hardly tell the systems apart, while the estimate, corrected by the labels, does:
what a judge's bias looks like, and what the human labels are for. Deterministic: ``python
make_data.py`` writes the same files. The files are committed; a user with real data replaces
them."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from judge_engine.fake.answers import AnswerBook
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol

HERE = Path(__file__).resolve().parent
SYSTEMS = {"human": 0.0, "gpt4o": 0.0, "nllb": -1.0, "m2m": -2.0}
"""Each system and what people find beyond the fake's truth, per item."""
LABELS_PER_SYSTEM = 25

WHO = ["The old ferryman", "My grandmother", "The stranger", "The youngest sister", "The priest", "Nobody",
       "The clerk", "Her brother", "The widow", "The boy from the mill"]
DID = ["kept the letters in a tin box", "watched the river rise all night", "forgot the name of the street",
       "laughed at the wrong moment", "closed the shutters before dusk"]
WHY = ["as if the house were listening.", "and never said why.", "while the bells rang for someone else.",
       "because the winter had taught him patience.", "long after the others had gone home."]
WER = ["Der alte Fährmann", "Meine Großmutter", "Der Fremde", "Die jüngste Schwester", "Der Pfarrer", "Niemand",
       "Der Schreiber", "Ihr Bruder", "Die Witwe", "Der Junge aus der Mühle"]
TAT = ["bewahrte die Briefe in einer Blechdose auf", "sah die ganze Nacht zu, wie der Fluss stieg",
       "vergaß den Namen der Straße", "lachte im falschen Moment", "schloss die Fensterläden vor der Dämmerung"]
WARUM = ["als ob das Haus zuhörte.", "und sagte nie, warum.", "während die Glocken für jemand anderen läuteten.",
         "weil der Winter ihn Geduld gelehrt hatte.", "lange nachdem die anderen heimgegangen waren."]


def passages() -> list[tuple[str, str]]:
    rng = random.Random(33)
    out = []
    for _ in range(50):
        i, j, k = rng.randrange(10), rng.randrange(5), rng.randrange(5)
        out.append((f"{WHO[i]} {DID[j]}, {WHY[k]}", f"{WER[i]} {TAT[j]}, {WARUM[k]}"))
    return out


def translation(german: str, system: str, n: int) -> str:
    """A system's rendering: the reference for ``human``, small variations for the machines."""
    if system == "human":
        return german
    if system == "gpt4o":  # fluent, a comma and a word apart
        return german.replace(", und", " und").replace("Großmutter", "Oma").replace("sah", "schaute")
    words = german.split()
    rng = random.Random(f"{system}:{n}")
    if system in ("nllb", "m2m") and len(words) > 4:  # a literal, flatter word order
        a = rng.randrange(1, len(words) - 2)
        words[a], words[a + 1] = words[a + 1], words[a]
    if system == "m2m":
        words = [w for w in words if w not in ("die", "der", "das")] or words
    return " ".join(words)


def main() -> None:
    with (HERE / "items.jsonl").open("w", encoding="utf-8") as handle:
        for n, (english, german) in enumerate(passages(), 1):
            for system in SYSTEMS:
                item = {"id": f"p{n:02d}-{system}", "system": system, "src_lang": "en", "tgt_lang": "de",
                        "src": english, "tgt": translation(german, system, n)}
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    config = load_config(HERE / "config.yaml")
    (judge,) = config.judges
    protocol = build_protocol(judge)
    book = AnswerBook()
    truth = {}
    for item in iter_items(config.dataset):
        answer, _ = book.answer(protocol.render(item), model="", temperature=0.0, json_mode=protocol.json_mode)
        truth[item["id"]] = (item["system"], protocol.score(protocol.parse(answer, item), item).score)
    rng = random.Random(7)
    rows = []
    for system, extra in SYSTEMS.items():
        ids = sorted(i for i, (s, _) in truth.items() if s == system)
        for item_id in sorted(rng.sample(ids, LABELS_PER_SYSTEM)):
            rows.append((item_id, system, round(truth[item_id][1] + extra, 2)))
    with (HERE / "humans.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "system", "mqm"])
        writer.writerows(rows)


if __name__ == "__main__":
    main()
