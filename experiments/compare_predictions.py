"""How many questions two prediction files answer with the same cells and operator.

    python experiments/compare_predictions.py A/predictions/dev.tsv B/predictions/dev.tsv

For a compact (float16) bundle against the float32 checkpoint it was made from: both predicted on
the same split, the share of questions with identical answer coordinates and operator. Prints one
JSON object, with up to five question ids that differ.
"""

import json
import sys

from tapas_tf.inference.prediction_files import read_predictions_tsv  # noqa: E402


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    first, second = ({p.question_id: p for p in read_predictions_tsv(path)} for path in argv[1:])
    if set(first) != set(second):
        print(f"the files predict different questions ({len(set(first) ^ set(second))} differ)", file=sys.stderr)
        return 1
    differ = [qid for qid in sorted(first)
              if (sorted(first[qid].coordinates), first[qid].aggregation)
              != (sorted(second[qid].coordinates), second[qid].aggregation)]
    print(json.dumps({"questions": len(first), "same": len(first) - len(differ),
                      "same_fraction": (len(first) - len(differ)) / max(len(first), 1),
                      "differ_examples": differ[:5]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
