"""How sure an answer is: a calibrated probability that it is right, and a flag when it is not sure.

    calibration = Calibration.load(model_dir)          # None without MODEL_DIR/calibration.json
    features = confidence_features(result, follow_up=False)
    calibration.confidence(features)                   # 0.62: about 62 in 100 such answers are right

The model's own probabilities are not the chance that an answer is right: a small model gives a
cell 0.9 and is wrong half the time. The confidence is a logistic regression on a few features of
the answer (`FEATURES`: how sure the selected cells are, how close the best cell left out comes,
how sure the operator is, whether the question follows up an earlier answer), fitted on questions
whose answers are known (`fit`; `tapas-tf calibrate` and `benchmarks/ask_accuracy.py` write them)
and stored beside the model. Without a calibration the confidence is the raw score
(`raw_confidence`), and results say it is uncalibrated.

`reliability_table` and `expected_calibration_error` measure a calibration on other questions.
"""

import dataclasses
import json
import math
import os
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from tapas_tf.qa.ask_results import AskResult

CALIBRATION_FILE = "calibration.json"
FEATURES = ("bias", "cell_logit", "left_out_logit", "operator_logit", "follow_up", "aggregated")
_EPSILON = 1e-4


def _logit(p: float) -> float:
    p = min(max(float(p), _EPSILON), 1 - _EPSILON)
    return math.log(p / (1 - p))


def selected_probability(result: AskResult) -> float:
    """Mean probability of the selected cells (0 when none is selected)."""
    probabilities = [cell.probability for cell in result.cells]
    return float(np.mean(probabilities)) if probabilities else 0.0


def left_out_probability(result: AskResult) -> float:
    """The highest probability of a cell the answer left out (0 when every cell is selected)."""
    chosen = set(result.coordinates)
    rest = [p for coordinate, p in result.cell_probabilities.items() if coordinate not in chosen]
    return float(max(rest)) if rest else 0.0


def operator_probability(result: AskResult) -> float:
    """The probability of the answer's operator (1 without an aggregation head)."""
    return (float(result.operator_probabilities.get(result.operator, 1.0))
            if result.operator_probabilities else 1.0)


def confidence_features(result: AskResult, follow_up: bool) -> Dict[str, float]:
    """FEATURES of one answer."""
    return {
        "bias": 1.0,
        "cell_logit": _logit(selected_probability(result)),
        "left_out_logit": _logit(left_out_probability(result)),
        "operator_logit": _logit(operator_probability(result)),
        "follow_up": float(follow_up),
        "aggregated": float(result.operator != "NONE"),
    }


def raw_confidence(result: AskResult) -> float:
    """The uncalibrated score: the selected cells' mean probability times the operator's."""
    return selected_probability(result) * operator_probability(result)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A fitted map from an answer's FEATURES to the probability that it is right.

    Attributes:
      weights: one per FEATURES name.
      threshold: answers below it are flagged as not sure.
      fitted_on: what the questions were (for the record).
      questions: how many questions it was fitted on.
    """

    weights: Mapping[str, float]
    threshold: float = 0.5
    fitted_on: str = ""
    questions: int = 0

    def confidence(self, features: Mapping[str, float]) -> float:
        score = sum(self.weights.get(name, 0.0) * features[name] for name in FEATURES)
        return 1.0 / (1.0 + math.exp(-max(min(score, 30.0), -30.0)))

    def to_json(self) -> dict:
        return {"features": list(FEATURES), "weights": dict(self.weights), "threshold": self.threshold,
                "fitted_on": self.fitted_on, "questions": self.questions}

    def save(self, model_dir: str) -> str:
        path = os.path.join(model_dir, CALIBRATION_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=1)
            f.write("\n")
        return path

    @classmethod
    def load(cls, model_dir: str) -> Optional["Calibration"]:
        """The model directory's calibration, None without one.

        Raises:
          ValueError: the file exists but is not a calibration (names the file).
        """
        path = os.path.join(model_dir, CALIBRATION_FILE)
        if not os.path.exists(path):
            return None
        try:
            with open(path, encoding="utf-8") as f:
                stored = json.load(f)
            weights = {name: float(stored["weights"][name]) for name in FEATURES}
            return cls(weights, float(stored.get("threshold", 0.5)), str(stored.get("fitted_on", "")),
                       int(stored.get("questions", 0)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a calibration file ({type(e).__name__}: {e})") from None


def fit(features: Sequence[Mapping[str, float]], correct: Sequence[bool], l2: float = 1.0,
        fitted_on: str = "", threshold: float = 0.5, iterations: int = 50) -> Calibration:
    """A logistic regression of `correct` on `features` (Newton's method, L2 on all but the bias).

    Raises:
      ValueError: no questions, or all of them right or all wrong (nothing to separate).
    """
    if not features or len(features) != len(correct):
        raise ValueError(f"fit needs one label per question, got {len(features)} and {len(correct)}")
    y = np.asarray(correct, dtype=np.float64)
    if y.min() == y.max():
        raise ValueError("fit needs right and wrong answers; these are all " + ("right" if y[0] else "wrong"))
    x = np.asarray([[f[name] for name in FEATURES] for f in features], dtype=np.float64)
    penalty = np.full(len(FEATURES), l2)
    penalty[0] = 0.0
    w = np.zeros(len(FEATURES))
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -30, 30)))
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(len(FEATURES))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return Calibration({name: round(float(v), 6) for name, v in zip(FEATURES, w)}, threshold, fitted_on,
                       len(y))


def reliability_table(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> List[dict]:
    """Per confidence bin [k/bins, (k+1)/bins): questions, mean confidence, accuracy (empty bins left out)."""
    confidences = np.asarray(confidences, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    index = np.minimum((confidences * bins).astype(int), bins - 1)
    table = []
    for k in range(bins):
        mask = index == k
        if mask.any():
            table.append({"bin": f"{k / bins:.1f}-{(k + 1) / bins:.1f}", "questions": int(mask.sum()),
                          "confidence": round(float(confidences[mask].mean()), 4),
                          "accuracy": round(float(correct[mask].mean()), 4)})
    return table


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool],
                               bins: int = 10) -> float:
    """Sum over bins of (share of questions) x |accuracy - mean confidence|."""
    total = len(confidences)
    return round(sum(row["questions"] / total * abs(row["accuracy"] - row["confidence"])
                     for row in reliability_table(confidences, correct, bins)), 4) if total else 0.0
