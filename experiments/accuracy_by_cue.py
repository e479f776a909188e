"""Denotation accuracy of prediction files, split by whether a question reads like aggregation.

    python experiments/accuracy_by_cue.py INTERACTIONS.tfrecord NAME=PREDICTIONS.tsv [NAME=PREDICTIONS.tsv ...]

What decides how the bundled pair of models shares questions (`TableQA.encode`): a first question
with an aggregation cue ("how many", "total", `qa.question_hints`) goes to the model with an
aggregation head. For each prediction file (WTQ-style: one question per interaction), the
accuracy on the questions with a cue and on those without, and for a pair of files A and B the
accuracy of answering cue questions with B and the rest with A ("A+B"). Prints one JSON object.

A second routing is measured beside it: cue questions and superlatives ("which pylon is the
tallest?", `SUPERLATIVE`) with B, the rest with A ("A+B+superlatives"). Only first questions are
scored, so an SQA file (sequences) can be given too: its first questions' accuracy.
"""

import json
import re
import sys
from typing import Dict, List

from tapas_tf.data.interaction_io import read_interactions  # noqa: E402
from tapas_tf.inference.prediction_files import read_predictions_tsv  # noqa: E402
from tapas_tf.inference.sequential import PredictionRun, question_results  # noqa: E402
from tapas_tf.qa.question_hints import aggregation_cue  # noqa: E402


# Superlative words of WikiTableQuestions' and SQA's questions; a probe for routing, not a model input.
SUPERLATIVE = re.compile(
    r"\b(most|least|highest|lowest|largest|smallest|biggest|longest|shortest|tallest|oldest|youngest|"
    r"newest|latest|earliest|first|last|top|best|worst|greatest|fewest|fastest|slowest|maximum|minimum)\b",
    re.IGNORECASE)


def _correct(interactions, path: str) -> Dict[str, bool]:
    """Question id -> whether the file's answer is right, scored as predict_and_evaluate scores it
    (an empty answer, a question that was not converted, is wrong)."""
    return dict(question_results(interactions, PredictionRun(read_predictions_tsv(path), {})))


def _accuracy(correct: Dict[str, bool], ids) -> Dict[str, float]:
    ids = list(ids)
    return {"questions": len(ids), "correct": sum(correct[i] for i in ids),
            "accuracy": round(sum(correct[i] for i in ids) / max(len(ids), 1), 4)}


def main(argv: List[str]) -> int:
    if len(argv) < 3 or not all("=" in a for a in argv[2:]):
        print(__doc__, file=sys.stderr)
        return 2
    interactions = list(read_interactions(argv[1]))
    first = {i.questions[0].id: i.questions[0].original_text for i in interactions}
    cue = {q for q, text in first.items() if aggregation_cue(text)}
    superlative = {q for q, text in first.items() if q not in cue and SUPERLATIVE.search(text)}
    rest = set(first) - cue - superlative
    files = dict(a.split("=", 1) for a in argv[2:])
    correct = {name: _correct(interactions, path) for name, path in files.items()}
    report = {name: {"all": _accuracy(c, first), "cue": _accuracy(c, cue),
                     "superlative": _accuracy(c, superlative), "no_cue": _accuracy(c, superlative | rest)}
              for name, c in correct.items()}
    names = list(files)
    if len(names) == 2:
        a, b = names
        for label, routed in ((f"{a}+{b}", cue), (f"{a}+{b}+superlatives", cue | superlative)):
            mixed = {i: (correct[b] if i in routed else correct[a])[i] for i in first}
            report[label] = {"all": _accuracy(mixed, first)}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
