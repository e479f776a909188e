"""Fit the confidence of each model's answers on questions held out of training, and measure it on dev.

    python benchmarks/ask_accuracy.py --holdout_report=MIX/mix_report.json ... --calibration_out=holdout.jsonl
    python benchmarks/ask_accuracy.py ... --calibration_out=dev.jsonl
    python benchmarks/calibrate.py --fit=holdout.jsonl --evaluate=dev.jsonl \
        --model_dir="bundled sqa_tiny=tapas_tf/checkpoints/bundled/sqa_tiny" \
        [--write] [--output=calibration.json]

Each line of the JSONL files is one asked question (`ask_accuracy.py`): the model that answered,
whether the answer was right, and its confidence features (`tapas_tf.qa.confidence.FEATURES`). One
logistic calibration is fitted per model on `--fit` (`confidence.fit`); `--write` stores it as the
model directory's calibration.json, which `TableQA` reads. On `--evaluate` (never used for fitting)
it prints the reliability table (confidence bins against accuracy) and the expected calibration
error, before (the raw score) and after, per model and overall.
"""

import argparse
import collections
import json
import math
import sys
from typing import Dict, List

from tapas_tf.qa.confidence import Calibration, expected_calibration_error, fit, reliability_table


def read_records(path: str) -> List[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def model_name(record: dict) -> str:
    """The model's directory name ("bundled sqa_tiny (LiteRT)" -> "sqa_tiny")."""
    name = record["model"]
    for backend in (" (LiteRT)", " (TensorFlow)"):
        name = name[: -len(backend)] if name.endswith(backend) else name
    return name[len("bundled "):] if name.startswith("bundled ") else name


def _raw(record: dict) -> float:
    """The uncalibrated score from the features: mean selected-cell probability x operator probability."""
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    return sigmoid(record["features"]["cell_logit"]) * sigmoid(record["features"]["operator_logit"])


def evaluate(records: List[dict], calibrations: Dict[str, Calibration]) -> dict:
    """Reliability and ECE of the raw score and of the calibrations on `records`."""
    raw = [_raw(r) for r in records]
    calibrated = [calibrations[model_name(r)].confidence(r["features"]) for r in records]
    correct = [r["correct"] for r in records]
    threshold = {name: c.threshold for name, c in calibrations.items()}
    flagged = [c < threshold[model_name(r)] for c, r in zip(calibrated, records)]
    sure = [ok for ok, low in zip(correct, flagged) if not low]
    return {
        "questions": len(records), "accuracy": round(sum(correct) / len(records), 4),
        "ece_raw": expected_calibration_error(raw, correct),
        "ece_calibrated": expected_calibration_error(calibrated, correct),
        "flagged_not_sure": round(sum(flagged) / len(records), 4),
        "accuracy_when_sure": round(sum(sure) / len(sure), 4) if sure else None,
        "reliability_calibrated": reliability_table(calibrated, correct),
        "reliability_raw": reliability_table(raw, correct),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", required=True,
                        help="JSONL of ask_accuracy.py on questions held out of training.")
    parser.add_argument("--evaluate", default="", help="JSONL of ask_accuracy.py on dev.")
    parser.add_argument("--model_dir", action="append", default=[],
                        help="NAME=DIR: where NAME's calibration goes.")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="Answers below it are flagged as not sure.")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--write", action="store_true", help="Write calibration.json into each --model_dir.")
    parser.add_argument("--output", default="")
    args = parser.parse_args(argv)
    dirs = dict(item.split("=", 1) for item in args.model_dir)
    by_model = collections.defaultdict(list)
    for record in read_records(args.fit):
        by_model[model_name(record)].append(record)
    calibrations = {}
    for name, records in sorted(by_model.items()):
        calibrations[name] = fit([r["features"] for r in records], [r["correct"] for r in records],
                                 l2=args.l2, fitted_on=f"{len(records)} questions of {args.fit}",
                                 threshold=args.threshold)
        print(name, json.dumps(calibrations[name].to_json()))
        if args.write:
            if name not in dirs:
                parser.error(f"no --model_dir for {name!r} (answered {len(records)} questions)")
            print("wrote", calibrations[name].save(dirs[name]))
    report = {"calibrations": {name: c.to_json() for name, c in calibrations.items()}}
    if args.evaluate:
        records = read_records(args.evaluate)
        report["evaluation"] = {"all": evaluate(records, calibrations)}
        for name in sorted({model_name(r) for r in records}):
            report["evaluation"][name] = evaluate([r for r in records if model_name(r) == name], calibrations)
        for name, result in report["evaluation"].items():
            print(name, json.dumps({k: v for k, v in result.items() if not k.startswith("reliability")}))
        print("reliability (all, calibrated):")
        for row in report["evaluation"]["all"]["reliability_calibrated"]:
            print(f"  {row['bin']}  {row['questions']:5d}  confidence {row['confidence']:.3f}  "
                  f"accuracy {row['accuracy']:.3f}")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
