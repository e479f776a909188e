"""Tests for tapas_tf.inference.metrics: denotation matching and SQA metrics."""

import json
import math

import numpy as np
import pytest

from tapas_tf.inference import metrics
from tapas_tf.inference.metrics import denotation_matches

# --- denotation_matches ------------------------------------------------------


@pytest.mark.parametrize(
    "predicted, gold",
    [
        (("1,000",), ["1000"]),
        (("1000",), ["1,000"]),
        (("2.0",), ["2"]),
        (("1000.0000001",), ["1000"]),  # Relative difference 1e-10.
        (("PARIS",), ["paris"]),
        (("  New   York ",), ["new york"]),  # Extra whitespace and case.
        (("10",), ["10.0"]),  # Numbers compare as values, not as strings.
        (("Zürich",), ["zurich"]),
        (("Paris[1]",), ["Paris"]),  # Citation marks are dropped.
        (("“Hello.”",), ['"hello"']),  # Typographic quotes, outer quotes, final period.
        (("b", "a"), ["a", "b"]),  # Order-free.
        (("2", "1,000"), ["1000", "2.0"]),
        # Dates as the official evaluator reads them: "yyyy-mm-dd", "xx" unknown, parts of any length.
        (("2001-5-3",), ["2001-05-03"]),
        (("XX-05-03",), ["xx-5-03"]),
        (("xxxx-12-xx",), ["xx-12-xx"]),
        (("1998-xx-xx",), ["1998"]),  # A date of only a year is that year's number.
        (("1998.0",), ["1998-xx-xx"]),
        (("May 3, 2001",), ["may 3, 2001"]),  # Written dates compare as strings.
        ((), []),
    ],
)
def test_text_predictions_that_match(predicted, gold):
    assert denotation_matches(predicted, gold, None)


@pytest.mark.parametrize(
    "predicted, gold",
    [
        (("1001",), ["1000"]),
        (("1000.01",), ["1000"]),  # Relative difference 1e-5.
        (("paris",), ["london"]),
        (("a", "a"), ["a", "b"]),  # Multisets: one "a" cannot stand for two.
        (("a",), ["a", "b"]),
        (("a", "b"), ["a"]),
        (("ten",), ["10"]),
        (("2001-05-03",), ["2001-05-04"]),
        (("2001-05-03",), ["2001"]),  # A date is not a number.
        (("2001-05-xx",), ["2001"]),
        (("2001-05-03",), ["2001-5-4"]),
        # The evaluator reads no written dates: these are different strings.
        (("May 3, 2001",), ["2001-05-03"]),
        (("3 May 2001",), ["may 3 2001"]),
        (("Sep 2001",), ["2001-09-xx"]),
        (("2001/05/03",), ["2001-05-03"]),
        ((), ["a"]),
    ],
)
def test_text_predictions_that_do_not_match(predicted, gold):
    assert not denotation_matches(predicted, gold, None)


def test_float_prediction_matches_single_gold_text_or_gold_float():
    assert denotation_matches(3.0, ["3"], None)
    assert denotation_matches(1000.0, ["1,000"], None)
    assert denotation_matches(np.float32(2.5), [], 2.5)
    assert denotation_matches(0.1, ["0.1"], np.float32(0.1))  # float32 gold within 1e-6.
    assert denotation_matches(0.0, ["0"], None)
    assert not denotation_matches(3.0, ["4"], None)
    assert not denotation_matches(3.0, ["3", "4"], None)  # A number is one value.
    assert not denotation_matches(3.0, ["three"], None)
    assert denotation_matches(1998.0, ["1998-xx-xx"], None)  # The evaluator's year-only date.
    assert not denotation_matches(1998.0, ["1998-01-xx"], None)
    assert not denotation_matches(3.0, [], None)
    assert not denotation_matches(3.0, [], math.nan)
    assert not denotation_matches(math.nan, ["3"], 3.0)


def test_text_prediction_matches_gold_float_when_there_are_no_gold_texts():
    assert denotation_matches(("3",), [], 3.0)
    assert not denotation_matches(("3", "4"), [], 3.0)
    assert not denotation_matches(("three",), [], 3.0)
    # Gold texts, when present, decide.
    assert not denotation_matches(("3",), ["4"], 3.0)


def test_denotation_matches_rejects_bare_strings():
    with pytest.raises(ValueError, match="gold_texts"):
        denotation_matches(("a",), "a", None)
    with pytest.raises(ValueError, match="predicted"):
        denotation_matches("a", ["a"], None)


# --- sqa_metrics -------------------------------------------------------------


def test_sqa_metrics_two_sequences_of_three_questions():
    results = [
        ("nt-1-0_0", True),
        ("nt-1-0_1", True),
        ("nt-1-0_2", True),
        ("nt-2-1_0", True),
        ("nt-2-1_1", False),
        ("nt-2-1_2", True),
    ]
    assert metrics.sqa_metrics(results) == {
        "ALL": 5 / 6,
        "SEQ": 1 / 2,  # Only nt-1-0 is entirely correct.
        "Q1": 1.0,
        "Q2": 1 / 2,
        "Q3": 1.0,
        "Q4+": None,
        "num_questions": 6,
        "num_sequences": 2,
    }


def test_sqa_metrics_groups_by_annotator_and_pools_later_positions():
    results = [
        ("nt-639-1_0", True),
        ("nt-639-2_0", False),  # Same table question, other annotator: another sequence.
        ("nt-639-1_3", True),
        ("nt-639-1_4", False),
        ("nt-639-1_5", True),
    ]
    got = metrics.sqa_metrics(iter(results))
    assert got["num_sequences"] == 2
    assert got["SEQ"] == 0.0
    assert got["ALL"] == 3 / 5
    assert (got["Q1"], got["Q2"], got["Q3"], got["Q4+"]) == (1 / 2, None, None, 2 / 3)


@pytest.mark.parametrize("question_id", ["nt-639", "nt-639-1", "nt-639-x_2", "nt-639-1_", "_1", 7])
def test_sqa_metrics_rejects_malformed_ids(question_id):
    with pytest.raises(ValueError, match="malformed SQA question id"):
        metrics.sqa_metrics([("nt-1-0_0", True), (question_id, True)])


def test_sqa_metrics_rejects_duplicates_and_empty_input():
    with pytest.raises(ValueError, match="'nt-1-0_0' appears more than once"):
        metrics.sqa_metrics([("nt-1-0_0", True), ("nt-1-0_0", False)])
    with pytest.raises(ValueError, match="at least one"):
        metrics.sqa_metrics([])


def test_parse_sqa_question_id():
    assert metrics.parse_sqa_question_id("nt-639-1_2") == ("nt-639-1", 2)
    assert metrics.parse_sqa_question_id("ns-3-a_b-0_11") == ("ns-3-a_b-0", 11)


# --- write_metrics_json ------------------------------------------------------


def test_write_metrics_json(tmp_path):
    path = tmp_path / "eval" / "metrics.json"
    metrics.write_metrics_json(str(path), {"b": np.float64(0.5), "a": 3, "c": None})
    assert path.read_text() == '{\n  "a": 3,\n  "b": 0.5,\n  "c": null\n}\n'
    assert json.loads(path.read_text()) == {"a": 3, "b": 0.5, "c": None}


def test_write_metrics_json_rejects_nan_and_unserialisable_values(tmp_path):
    path = str(tmp_path / "metrics.json")
    with pytest.raises(ValueError, match="metrics.json"):
        metrics.write_metrics_json(path, {"ALL": math.nan})
    with pytest.raises(ValueError, match="not JSON"):
        metrics.write_metrics_json(path, {"ALL": object()})
