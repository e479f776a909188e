"""Confidence: features of hand-made answers, the logistic fit on a case with a known answer, the
reliability table and expected calibration error by hand, the calibration file's round trip and
errors, and TableQA flagging answers below the threshold."""

import json
import math
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tapas_tf.qa import confidence  # noqa: E402
from tapas_tf.qa.ask_results import AskResult, SelectedCell  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tests.inference.test_sequential import write_random_model_dir  # noqa: E402


def _result(selected, probabilities, operator="NONE", operators=None):
    cells = tuple(SelectedCell(r, c, "x", "t", probabilities[(r, c)], None) for r, c in selected)
    return AskResult("q", cells, operator, operators or {}, None, (), probabilities, (), (), (), 64)


def test_features_of_a_hand_made_answer():
    result = _result([(0, 0), (1, 0)], {(0, 0): 0.9, (1, 0): 0.7, (2, 0): 0.2, (0, 1): 0.4}, "COUNT",
                     {"NONE": 0.25, "COUNT": 0.75})
    features = confidence.confidence_features(result, follow_up=True)
    assert features["cell_logit"] == pytest.approx(math.log(0.8 / 0.2))
    assert features["left_out_logit"] == pytest.approx(math.log(0.4 / 0.6))
    assert features["operator_logit"] == pytest.approx(math.log(3))
    assert (features["bias"], features["follow_up"], features["aggregated"]) == (1.0, 1.0, 1.0)
    assert confidence.raw_confidence(result) == pytest.approx(0.8 * 0.75)
    nothing = _result([], {(0, 0): 0.1})
    assert confidence.selected_probability(nothing) == 0.0 and confidence.operator_probability(nothing) == 1.0


def test_the_fit_recovers_a_known_logistic_model():
    rng = np.random.default_rng(0)
    features, correct = [], []
    for _ in range(4000):
        cell = rng.normal(0, 2)
        p = 1 / (1 + math.exp(-(-1.0 + 1.5 * cell)))
        features.append({"bias": 1.0, "cell_logit": cell, "left_out_logit": rng.normal(),
                         "operator_logit": 0.0, "follow_up": 0.0, "aggregated": 0.0})
        correct.append(rng.random() < p)
    fitted = confidence.fit(features, correct, l2=0.0)
    assert fitted.weights["bias"] == pytest.approx(-1.0, abs=0.15)
    assert fitted.weights["cell_logit"] == pytest.approx(1.5, abs=0.15)
    assert abs(fitted.weights["left_out_logit"]) < 0.15
    assert fitted.questions == 4000


def test_the_fit_refuses_what_it_cannot_separate():
    features = [confidence.confidence_features(_result([(0, 0)], {(0, 0): 0.9}), False)] * 3
    with pytest.raises(ValueError, match="all right"):
        confidence.fit(features, [True] * 3)
    with pytest.raises(ValueError, match="one label per question"):
        confidence.fit(features, [True])


def test_reliability_table_and_ece_by_hand():
    confidences = [0.05, 0.15, 0.12, 0.95, 0.91]
    correct = [False, True, False, True, True]
    assert confidence.reliability_table(confidences, correct) == [
        {"bin": "0.0-0.1", "questions": 1, "confidence": 0.05, "accuracy": 0.0},
        {"bin": "0.1-0.2", "questions": 2, "confidence": 0.135, "accuracy": 0.5},
        {"bin": "0.9-1.0", "questions": 2, "confidence": 0.93, "accuracy": 1.0}]
    # 1/5 * 0.05 + 2/5 * 0.365 + 2/5 * 0.07
    assert confidence.expected_calibration_error(confidences, correct) == pytest.approx(0.184)


def test_a_calibration_file_round_trips_and_a_bad_one_names_itself(tmp_path):
    calibration = confidence.Calibration({name: 0.5 for name in confidence.FEATURES}, 0.4, "held-out", 12)
    calibration.save(str(tmp_path))
    assert confidence.Calibration.load(str(tmp_path)) == calibration
    assert confidence.Calibration.load(str(tmp_path / "nowhere")) is None
    (tmp_path / confidence.CALIBRATION_FILE).write_text(json.dumps({"weights": {"bias": 1}}))
    with pytest.raises(ValueError, match=r"calibration.json: not a calibration file \(KeyError"):
        confidence.Calibration.load(str(tmp_path))


def test_table_qa_uses_the_directorys_calibration_and_flags_what_is_not_sure(tmp_path):
    model_dir = write_random_model_dir(tmp_path / "model")
    frame = pd.DataFrame({"city": ["paris", "rome"], "population": ["2,100", "2,800"]})
    raw = TableQA.from_model_dir(model_dir).answer(frame, "which city?")
    assert not raw.calibrated and raw.confidence == pytest.approx(confidence.raw_confidence(raw))
    assert raw.sure is None and not any(note.startswith("Not sure") for note in raw.notes)
    weights = {name: 0.0 for name in confidence.FEATURES}
    confidence.Calibration(dict(weights, bias=-2.0), 0.5, "test").save(model_dir)  # Always 0.119.
    result = TableQA.from_model_dir(model_dir).answer(frame, "which city?")
    assert result.calibrated and result.confidence == pytest.approx(1 / (1 + math.exp(2)))
    assert result.sure is False
    assert result.notes[-1] == ("Not sure: this answer's confidence is 0.12 (about 12 in 100 answers this "
                                "confident are right); check it against the table.")
    assert result.to_dict()["confidence"] == pytest.approx(0.1192) and result.to_dict()["sure"] is False
    confidence.Calibration(dict(weights, bias=2.0), 0.5, "test").save(model_dir)
    sure = TableQA.from_model_dir(model_dir).answer(frame, "which city?")
    assert sure.sure and not any(note.startswith("Not sure") for note in sure.notes)
