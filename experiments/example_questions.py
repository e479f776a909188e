"""Twelve questions a new user might ask of the three example tables, with their answers: how a
model (or a pair) fares on real tables through the ask API, as a user meets it.

    python experiments/example_questions.py [--model_dir=DIR] [--aggregation_model_dir=DIR|none]

Without flags: the bundled model(s). Prints each question, the answer, and whether it is right; an
answer is right when its value (COUNT, SUM, AVERAGE) equals the gold number, or when its cells'
texts are exactly the gold texts. The questions were written before any model was asked; the
medal table is a WTQ training table, the other two are WTQ dev tables.
"""

import argparse
import os
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tapas_tf", "data",
                        "example_tables")
QUESTIONS = (
    ("shooting_1988_medals.csv", "which nation won the most gold medals?", ["Soviet Union (URS)"]),
    ("shooting_1988_medals.csv", "how many nations won at least one gold medal?", [9]),
    ("shooting_1988_medals.csv", "what is the total number of silver medals?", [13]),
    ("shooting_1988_medals.csv", "how many bronze medals did hungary win?", ["2"]),
    ("playa_de_oro_airport_destinations.csv", "which city had the most passengers?", ["United States, Los Angeles"]),
    ("playa_de_oro_airport_destinations.csv", "how many passengers flew to calgary?", ["3,761"]),
    ("playa_de_oro_airport_destinations.csv", "how many cities are in canada?", [5]),
    ("playa_de_oro_airport_destinations.csv", "what airline flies to houston?", ["United Express"]),
    ("aerial_lift_pylons.csv", "which pylon is the tallest?", ["Glacial Aerial Tramway Kaprun III"]),
    ("aerial_lift_pylons.csv", "how many pylons are in austria?", [3]),
    ("aerial_lift_pylons.csv", "what is the height of torre jaume i?", ["107 m"]),
    ("aerial_lift_pylons.csv", "which country is the roosevelt island tramway in?", ["USA"]),
)


def is_right(result, gold) -> bool:
    """A number answers a numeric gold (an aggregation's value, or one cell holding it); texts answer texts."""
    if isinstance(gold[0], (int, float)):
        if result.value is not None:
            return abs(float(result.value) - gold[0]) < 1e-6
        return [c.text for c in result.cells] == [str(gold[0])]
    return result.value is None and sorted(c.text for c in result.cells) == sorted(gold)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", default=None)
    parser.add_argument("--aggregation_model_dir", default=None)
    args = parser.parse_args(argv)
    from tapas_tf.qa.table_qa import TableQA  # pylint: disable=import-outside-toplevel

    qa = TableQA.from_model_dir(args.model_dir, aggregation_model_dir=args.aggregation_model_dir)
    right = 0
    for table, question, gold in QUESTIONS:
        result = qa.answer(os.path.join(EXAMPLES, table), question)
        ok = is_right(result, gold)
        right += ok
        print(f"{'RIGHT' if ok else 'wrong'}  {question}  ->  {result.summary}  [{result.model}]  (gold {gold[0]})")
    print(f"{right} of {len(QUESTIONS)} right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
