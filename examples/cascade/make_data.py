"""Writes this example's data: 300 calibration pairs and 20 pairs to judge (each an instruction
and two plausible answers, so that preferring one is a judgment call), and the human labels of
both: the demo fake server's truth (``judge_engine.fake.writers.annotators.preferred``, what its
simulated judges are right or wrong about) with 2% of the labels flipped, as real annotators
disagree with any truth now and then. Deterministic: ``python make_data.py`` writes the same
files. The files are committed; a user with real data replaces them."""

from __future__ import annotations

import csv
import itertools
import json
import random
from pathlib import Path

from judge_engine.fake.writers.annotators import preferred

HERE = Path(__file__).resolve().parent
ASKS = [
    ("Suggest a name for a {x}.", ["{A} is short and easy to call.", "I would go with {B}: it has some character."]),
    ("Give one tip for keeping a {x} healthy.", ["Check on your {x} every day and keep its space clean.",
                                                   "Give a {x} a steady routine; most trouble starts with changes."]),
    ("Describe a {x} in one sentence.", ["A {x} is a familiar sight, and easy to overlook.",
                                         "Seen up close, a {x} has more detail than you expect."]),
    ("Write a short caption for a photo of a {x}.", ["Just a {x}, minding its own business.",
                                                      "Morning light and one very patient {x}."]),
    ("What should a beginner know before getting a {x}?", ["A {x} takes more time each week than people think.",
                                                           "Read about the {x} first, then talk to someone who has one."]),
    ("Tell a one-line joke about a {x}.", ["My {x} has one talent: being somewhere else.",
                                           "Why did the {x} stay home? It had nothing to prove."]),
]
THINGS = ["cat", "parrot", "goldfish", "bonsai tree", "sourdough starter", "tortoise", "rabbit", "orchid",
          "beehive", "vegetable garden", "hamster", "fern", "pony", "canary", "herb box", "gecko", "lemon tree",
          "koi pond", "ferret", "cactus", "tomato plant", "guinea pig", "chicken coop", "aquarium", "dog",
          "rose bush", "budgie", "snail", "worm farm", "apple tree", "lizard", "bamboo", "mushroom log",
          "turtle", "finch", "lavender bed", "sheep", "pigeon loft", "moss wall", "newt", "goat", "ivy",
          "kitten", "puppy", "cherry tree", "peace lily", "axolotl", "duck pond", "strawberry patch", "alpaca",
          "chameleon", "olive tree", "hedgehog", "pepper plant", "tarantula", "sunflower row", "donkey",
          "water lily", "quail", "succulent", "rose cutting", "hermit crab", "fig tree", "mint pot", "cockatiel",
          "tulip bed", "chinchilla", "yucca", "lovebird", "basil pot"]
NAMES = ["Pepper", "Moss", "Juniper", "Biscuit", "Otis", "Wren", "Clover", "Basil", "Tansy", "Ziggy", "Fig", "Nutmeg"]


def pairs() -> list[dict[str, str]]:
    out = []
    for n, ((ask, answers), thing) in enumerate(itertools.product(ASKS, THINGS)):
        a, b = (s.format(x=thing, A=NAMES[n % 12], B=NAMES[(n * 5 + 3) % 12]) for s in answers)
        out.append({"instruction": ask.format(x=thing), "response_a": a, "response_b": b})
    random.Random(25).shuffle(out)
    return out[:320]


def main() -> None:
    rows = pairs()
    flips = random.Random(7)
    labels = []
    for name, part, prefix in (("calibration.jsonl", rows[:300], "cal"), ("items.jsonl", rows[300:], "item")):
        with (HERE / name).open("w", encoding="utf-8") as handle:
            for n, row in enumerate(part, 1):
                item = {"id": f"{prefix}-{n:03d}", **row}
                handle.write(json.dumps(item) + "\n")
                label = preferred(row["instruction"], row["response_a"], row["response_b"])
                labels.append((item["id"], {"A": "B", "B": "A"}[label] if flips.random() < 0.02 else label))
    with (HERE / "human.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "human"])
        writer.writerows(labels)


if __name__ == "__main__":
    main()
