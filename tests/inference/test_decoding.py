"""Tests for tapas_tf.inference.decoding on a hand-drawn encoded table.

The encoded example (15 tokens) holds a 2 x 2 body:

    index        0    1  2  3      4    5    6  7    8    9    10 11 12   13  14
    token      [CLS]  q  q [SEP]  h1   h2   c00 c00 c01  c10  c11 c11 c11  pad pad
    row_id       0    0  0  0      0    0    1  1    1    2    2  2  2    0   0
    column_id    0    0  0  0      1    2    1  1    2    1    2  2  2    0   0
    input_mask   1    1  1  1      1    1    1  1    1    1    1  1  1    0   0
    probability  1    1  1  1      1    1   1/8 3/8  3/4  1/2  1 1/2 3/4   1   1

so the body cells average to (0,0): 1/4, (0,1): 3/4, (1,0): 1/2, (1,1): 9/4/3 = 3/4.
All values are dyadic, so float32 and float64 give them exactly.
"""

import math

import numpy as np
import pytest

from tapas_tf.data import number_parsing
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.inference import decoding as prediction, execution, prediction_files
from tapas_tf.inference.decoding import AVERAGE, COUNT, NONE, SUM, Prediction

ROW_IDS = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 0], dtype=np.int32)
COLUMN_IDS = np.array([0, 0, 0, 0, 1, 2, 1, 1, 2, 1, 2, 2, 2, 0, 0], dtype=np.int32)
INPUT_MASK = np.array([1] * 13 + [0, 0], dtype=np.int32)
PROBABILITIES = np.array(
    [1, 1, 1, 1, 1, 1, 0.125, 0.375, 0.75, 0.5, 1.0, 0.5, 0.75, 1, 1], dtype=np.float32
)
CELLS = {(0, 0): 0.25, (0, 1): 0.75, (1, 0): 0.5, (1, 1): 0.75}


def _cell(text, number=None, year=None):
    cell = interaction_pb2.Cell(text=text)
    if number is not None:
        cell.numeric_value.float_value = number
    if year is not None:
        cell.numeric_value.date.year = year
    return cell


def _table():
    """A 3 x 3 table.

        Name    | Points                | Year
        Ann     | 10 (annotated 10)     | 1998 (annotated as a date)
        Bob     | 1,500 (no annotation) | two and a half (annotated 2.5)
        Cid     | unknown               | n/a
    """
    table = interaction_pb2.Table(table_id="t1")
    for name in ("Name", "Points", "Year"):
        table.columns.add(text=name)
    rows = [
        [_cell("Ann"), _cell("10", number=10.0), _cell("1998", year=1998)],
        [_cell("Bob"), _cell("1,500"), _cell("two and a half", number=2.5)],
        [_cell("Cid"), _cell("unknown"), _cell("n/a")],
    ]
    for cells in rows:
        table.rows.add().cells.extend(cells)
    return table


# --- cell_probabilities ------------------------------------------------------


def test_cell_probabilities_average_multi_token_cells_and_skip_non_body_tokens():
    cells = prediction.cell_probabilities(PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK)
    assert cells == CELLS
    assert list(cells) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_cell_probabilities_ignore_masked_tokens():
    # Masking token 10 (probability 1) leaves (1,1) = (1/2 + 3/4) / 2 = 5/8.
    mask = INPUT_MASK.copy()
    mask[10] = 0
    cells = prediction.cell_probabilities(PROBABILITIES, COLUMN_IDS, ROW_IDS, mask)
    assert cells[(1, 1)] == 0.625
    # A cell whose tokens are all masked disappears.
    mask[8] = 0
    assert (0, 1) not in prediction.cell_probabilities(PROBABILITIES, COLUMN_IDS, ROW_IDS, mask)


def test_cell_probabilities_reject_mismatched_or_batched_shapes():
    with pytest.raises(ValueError, match="equal lengths"):
        prediction.cell_probabilities(PROBABILITIES[:-1], COLUMN_IDS, ROW_IDS, INPUT_MASK)
    with pytest.raises(ValueError, match="1-D"):
        prediction.cell_probabilities(
            PROBABILITIES[None], COLUMN_IDS[None], ROW_IDS[None], INPUT_MASK[None]
        )


# --- decode_prediction -------------------------------------------------------


def test_decode_selects_cells_strictly_above_threshold_without_aggregation_head():
    decoded = prediction.decode_prediction(
        "q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK
    )
    # (1,0) is exactly 0.5, so not selected at the default threshold.
    assert decoded == Prediction(
        question_id="q0",
        coordinates=((0, 1), (1, 1)),
        aggregation=NONE,
        aggregation_probabilities=(),
        cell_probabilities=CELLS,
        answer=None,
    )


def test_decode_threshold_changes_selection():
    low = prediction.decode_prediction(
        "q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, threshold=0.2
    )
    assert low.coordinates == ((0, 0), (0, 1), (1, 0), (1, 1))
    high = prediction.decode_prediction(
        "q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, threshold=0.75
    )
    assert high.coordinates == ()


def test_decode_aggregation_is_argmax_with_softmax_probabilities_and_executes():
    # softmax(log([1, 2, 4, 1])) = [1, 2, 4, 1] / 8.
    logits = np.log(np.array([1.0, 2.0, 4.0, 1.0], dtype=np.float32))
    decoded = prediction.decode_prediction(
        "q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, logits, table=_table()
    )
    assert decoded.aggregation == AVERAGE
    assert decoded.aggregation_probabilities == pytest.approx((0.125, 0.25, 0.5, 0.125), abs=1e-7)
    # AVERAGE of (0,1) "10" and (1,1) "1,500": (10 + 1500) / 2.
    assert decoded.answer == 755.0


def test_fallback_to_best_cell_answers_a_none_question_that_selects_nothing():
    # At threshold 0.75 no cell is strictly above; (0,1) and (1,1) tie at 3/4 and the first in
    # (row, column) order wins. Executed on the table: (0,1) is "10".
    kwargs = dict(threshold=0.75, table=_table())
    assert prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, **kwargs).answer == ()
    decoded = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK,
                                           fallback_to_best_cell=True, **kwargs)
    assert (decoded.coordinates, decoded.aggregation, decoded.answer) == (((0, 1),), NONE, ("10",))
    # With an aggregation head that chose NONE: the same.
    none_logits = np.array([3.0, 0.0, 0.0, 0.0], dtype=np.float32)
    decoded = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, none_logits,
                                           fallback_to_best_cell=True, **kwargs)
    assert decoded.coordinates == ((0, 1),)


def test_fallback_to_best_cell_leaves_other_operators_and_real_selections_alone():
    # COUNT of nothing is 0, a possible answer: the empty selection stays.
    count_logits = np.array([0.0, 0.0, 0.0, 3.0], dtype=np.float32)
    counted = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, count_logits,
                                           threshold=0.75, table=_table(), fallback_to_best_cell=True)
    assert (counted.coordinates, counted.aggregation, counted.answer) == ((), COUNT, 0.0)
    # A selection above the threshold is not changed.
    selected = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK,
                                            fallback_to_best_cell=True)
    assert selected.coordinates == ((0, 1), (1, 1))
    # No body cell encoded at all: still nothing.
    no_body = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, np.zeros_like(ROW_IDS), INPUT_MASK,
                                           fallback_to_best_cell=True)
    assert no_body.coordinates == ()


def test_expected_count_counts_the_k_most_probable_cells():
    # The cells sum to 1/4 + 3/4 + 1/2 + 3/4 = 9/4, which rounds to 2: the two 3/4 cells. At
    # threshold 0.75 no cell is strictly above, so the thresholded COUNT is 0.
    count_logits = np.array([0.0, 0.0, 0.0, 3.0], dtype=np.float32)
    kwargs = dict(threshold=0.75, table=_table())
    plain = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, count_logits, **kwargs)
    assert (plain.coordinates, plain.answer) == ((), 0.0)
    expected = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, count_logits,
                                            expected_count=True, **kwargs)
    assert (expected.coordinates, expected.aggregation, expected.answer) == (((0, 1), (1, 1)), COUNT, 2.0)
    # At the default threshold the same two cells pass, and the two rules agree.
    default = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, count_logits,
                                           expected_count=True, table=_table())
    assert default.coordinates == ((0, 1), (1, 1))


def test_expected_count_leaves_other_operators_alone():
    for logits, operator in ((np.array([3.0, 0.0, 0.0, 0.0]), NONE), (np.array([0.0, 3.0, 0.0, 0.0]), SUM),
                             (np.array([0.0, 0.0, 3.0, 0.0]), AVERAGE)):
        decoded = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK,
                                               logits.astype(np.float32), threshold=0.75, expected_count=True)
        assert (decoded.aggregation, decoded.coordinates) == (operator, ())


def test_expected_count_cells_rounds_half_up_and_breaks_ties_in_cell_order():
    # 0.5 * 3 + 1.0 = 2.5 rounds up to 3: the sure cell, then the first two of the tied ones.
    cells = {(0, 0): 0.5, (1, 0): 0.5, (2, 0): 0.5, (3, 0): 1.0}
    assert prediction.expected_count_cells(cells) == ((3, 0), (0, 0), (1, 0))
    # 0.2 + 0.29 = 0.49 rounds to 0: no cell.
    assert prediction.expected_count_cells({(0, 0): 0.2, (0, 1): 0.29}) == ()
    assert prediction.expected_count_cells({}) == ()
    # Many unsure cells add up: ten at 0.3 count 3.
    assert len(prediction.expected_count_cells({(r, 0): 0.3 for r in range(10)})) == 3


def test_decode_rejects_bad_aggregation_logits():
    with pytest.raises(ValueError, match="aggregation_logits"):
        prediction.decode_prediction(
            "q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK, np.zeros([5])
        )


def test_prediction_normalises_and_validates_fields():
    p = Prediction("q", [[1, 0], (0, 2)], 3, [0.5], {(1, 0): 1}, ["a"])
    assert p.coordinates == ((0, 2), (1, 0))
    assert p.answer == ("a",)
    assert p.cell_probabilities == {(1, 0): 1.0}
    with pytest.raises(ValueError, match="aggregation"):
        Prediction("q", (), 4, (), {})
    with pytest.raises(ValueError, match="coordinate"):
        Prediction("q", [(0, -1)], 0, (), {})
    with pytest.raises(ValueError, match="answer"):
        Prediction("q", (), 0, (), {}, "text")


# --- execute -----------------------------------------------------------------


def test_execute_none_returns_texts_in_coordinate_order():
    assert execution.execute([(2, 1), (0, 0)], NONE, _table()) == ("unknown", "Ann")


def test_execute_count_counts_every_cell():
    assert execution.execute([(0, 0), (1, 1), (2, 1)], COUNT, _table()) == 3.0


def test_execute_sum_and_average_skip_cells_without_a_number():
    # Points column: 10 (annotated) + 1,500 (parsed from text); "unknown" is skipped.
    points = [(0, 1), (1, 1), (2, 1)]
    assert execution.execute(points, SUM, _table()) == 1510.0
    assert execution.execute(points, AVERAGE, _table()) == 755.0


def test_execute_uses_annotated_float_and_falls_back_to_text_for_dates():
    # "two and a half" is annotated 2.5; "1998" is annotated as a date, so its text is parsed.
    year_column = [(0, 2), (1, 2), (2, 2)]
    assert execution.execute(year_column, SUM, _table()) == 2000.5
    assert execution.execute(year_column, AVERAGE, _table()) == 1000.25


def test_execute_empty_and_non_numeric_selections():
    table = _table()
    assert execution.execute([], NONE, table) == ()
    assert execution.execute([], COUNT, table) == 0.0
    assert execution.execute([], SUM, table) == 0.0
    assert math.isnan(execution.execute([], AVERAGE, table))
    names = [(0, 0), (1, 0)]
    assert execution.execute(names, SUM, table) == 0.0
    assert math.isnan(execution.execute(names, AVERAGE, table))
    assert execution.execute(names, COUNT, table) == 2.0


def test_execute_rejects_unknown_operator_and_outside_coordinates():
    with pytest.raises(ValueError, match="aggregation"):
        execution.execute([(0, 1)], 4, _table())
    with pytest.raises(ValueError, match=r"\(3, 0\) is outside table 't1'"):
        execution.execute([(3, 0)], NONE, _table())
    with pytest.raises(ValueError, match="outside"):
        execution.execute([(0, 3)], NONE, _table())


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12", 12.0),
        (" -3.5 ", -3.5),
        ("1,234.5", 1234.5),
        ("1,000,000", 1e6),
        ("1e3", 1000.0),
        ("1,2", None),
        ("12,34", None),
        ("1_000", None),
        ("$5", None),
        ("nan", None),
        ("inf", None),
        ("", None),
    ],
)
def test_parse_plain_number(text, expected):
    assert number_parsing.parse_plain_number(text) == expected


# --- coordinates_to_label_ids ------------------------------------------------


def test_coordinates_to_label_ids_labels_every_token_of_each_cell():
    labels = prediction.coordinates_to_label_ids([(0, 1), (1, 1)], COLUMN_IDS, ROW_IDS)
    assert labels.dtype == np.int32
    np.testing.assert_array_equal(labels, [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0])


def test_coordinates_to_label_ids_ignores_cells_without_tokens():
    labels = prediction.coordinates_to_label_ids([(0, 0), (5, 5)], COLUMN_IDS, ROW_IDS)
    np.testing.assert_array_equal(labels, [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    empty = prediction.coordinates_to_label_ids([], COLUMN_IDS, ROW_IDS)
    np.testing.assert_array_equal(empty, np.zeros([15]))


def test_decoded_coordinates_round_trip_to_label_ids():
    decoded = prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK)
    labels = prediction.coordinates_to_label_ids(decoded.coordinates, COLUMN_IDS, ROW_IDS)
    # Feeding the labels back as probabilities selects the same cells.
    again = prediction.decode_prediction("q0", labels, COLUMN_IDS, ROW_IDS, INPUT_MASK)
    assert again.coordinates == decoded.coordinates


# --- TSV ---------------------------------------------------------------------

HEADER = (
    "question_id\tanswer_coordinates\tanswer\taggregation\t"
    "aggregation_probabilities\tcell_probabilities"
)


def _predictions():
    return [
        Prediction(
            question_id="nt-1-0_0",
            coordinates=((0, 1), (1, 1)),
            aggregation=SUM,
            aggregation_probabilities=(0.125, 0.25, 0.5, 0.125),
            cell_probabilities=CELLS,
            answer=1510.0,
        ),
        Prediction(
            question_id="nt-1-0_1",
            coordinates=((2, 0),),
            aggregation=NONE,
            aggregation_probabilities=(),
            cell_probabilities={(2, 0): 0.9876},
            answer=("it's", 'say "hi"', "a\tb", "Zürich", "x\ny"),
        ),
        Prediction(
            question_id="nt-1-0_2",
            coordinates=(),
            aggregation=COUNT,
            aggregation_probabilities=(0.0, 0.0, 0.0, 1.0),
            cell_probabilities={},
            answer=None,
        ),
        Prediction("nt-1-0_3", (), NONE, (), {}, answer=()),
    ]


def test_tsv_round_trip(tmp_path):
    path = str(tmp_path / "predictions.tsv")
    prediction_files.write_predictions_tsv(path, _predictions())
    assert prediction_files.read_predictions_tsv(path) == _predictions()


def test_tsv_layout(tmp_path):
    path = tmp_path / "predictions.tsv"
    prediction_files.write_predictions_tsv(str(path), _predictions()[:1])
    assert path.read_text(encoding="utf-8") == (
        HEADER + "\n"
        "nt-1-0_0\t['(0, 1)', '(1, 1)']\t1510.0\tSUM\t0.1250 0.2500 0.5000 0.1250\t"
        "0,0:0.2500 0,1:0.7500 1,0:0.5000 1,1:0.7500\n"
    )


def test_tsv_rounds_probabilities_to_four_decimals_and_keeps_nan_answers(tmp_path):
    path = str(tmp_path / "predictions.tsv")
    written = Prediction("q", ((0, 0),), AVERAGE, (0.123456, 0.876544), {(0, 0): 0.66666}, math.nan)
    prediction_files.write_predictions_tsv(path, [written])
    (read,) = prediction_files.read_predictions_tsv(path)
    assert read.aggregation_probabilities == (0.1235, 0.8765)
    assert read.cell_probabilities == {(0, 0): 0.6667}
    assert math.isnan(read.answer)
    assert (read.coordinates, read.aggregation) == (((0, 0),), AVERAGE)


def test_tsv_rejects_question_id_with_tab(tmp_path):
    with pytest.raises(ValueError, match="tab"):
        prediction_files.write_predictions_tsv(
            str(tmp_path / "p.tsv"), [Prediction("a\tb", (), NONE, (), {})]
        )


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("question_id\tanswer\n", 1, "expected header"),
        ("", 1, "expected header"),
        (HEADER + "\nq\t[]\t\tNONE\t\t\nq\t[]\n", 3, "6 tab-separated fields"),
        (HEADER + "\nq\t[]\t\tMAX\t\t\n", 2, "unknown aggregation 'MAX'"),
        (HEADER + "\nq\t[(0, 1)]\t\tNONE\t\t\n", 2, "bad answer coordinate"),
        (HEADER + "\nq\t['(0,1)']\t\tNONE\t\t\n", 2, "bad answer coordinate"),
        (HEADER + "\nq\t[\t\tNONE\t\t\n", 2, ""),
        (HEADER + "\nq\t[]\t[1, 2]\tNONE\t\t\n", 2, "answer is not a list of strings"),
        (HEADER + "\nq\t[]\tabc\tNONE\t\t\n", 2, "could not convert"),
        (HEADER + "\nq\t[]\t\tNONE\t0.5 x\t\n", 2, "could not convert"),
        (HEADER + "\nq\t[]\t\tNONE\t\t0,1=0.5\n", 2, "bad cell probability '0,1=0.5'"),
    ],
)
def test_read_bad_tsv_names_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=f"bad.tsv:{line}: .*{message}"):
        prediction_files.read_predictions_tsv(str(path))


# --- DecodingRule: one place for every decoding option ------------------------------------------


def test_a_rule_decodes_as_decode_prediction_with_its_options():
    rule = prediction.DecodingRule(threshold=0.8, fallback_to_best_cell=True)
    decoded = rule.decode("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK)
    # No cell is above 0.8: the first of the two best cells (0, 1) and (1, 1), both 3/4, is taken.
    assert decoded.coordinates == ((0, 1),)
    assert decoded == prediction.decode_prediction("q0", PROBABILITIES, COLUMN_IDS, ROW_IDS, INPUT_MASK,
                                                   threshold=0.8, fallback_to_best_cell=True)


def test_flag_specs_name_every_option_with_its_type_and_help():
    specs = prediction.DecodingRule.flag_specs()
    assert [(name, kind) for name, kind, _ in specs] == [
        ("threshold", float), ("fallback_to_best_cell", bool), ("expected_count", bool)]
    assert all(text.endswith(".") and len(text) > 20 for _, _, text in specs)
    assert prediction.DecodingRule().as_dict() == {"threshold": 0.5, "fallback_to_best_cell": False,
                                                   "expected_count": False}


def test_overrides_replace_only_the_options_given_and_refuse_unknown_ones():
    rule = prediction.DecodingRule(threshold=0.3, expected_count=True)
    assert rule.with_overrides(threshold=None, fallback_to_best_cell=True) == prediction.DecodingRule(
        threshold=0.3, fallback_to_best_cell=True, expected_count=True)
    with pytest.raises(TypeError, match=r"unknown decoding option\(s\) \['treshold'\]"):
        rule.with_overrides(treshold=0.4)


class _Preset:  # A task preset names some options (tasks.TaskPreset: fallback and expected count).
    fallback_to_best_cell = True
    expected_count = False
    learning_rate = 1e-4


def test_a_tasks_rule_takes_the_options_its_preset_names():
    assert prediction.DecodingRule.for_preset(_Preset()) == prediction.DecodingRule(fallback_to_best_cell=True)
    assert prediction.DecodingRule.for_preset(_Preset(), threshold=0.2, fallback_to_best_cell=None) == \
        prediction.DecodingRule(threshold=0.2, fallback_to_best_cell=True)


@pytest.mark.parametrize("config, fallback, expected_count", [
    ({"select_one_column": True, "use_answer_as_supervision": False}, True, False),   # SQA's
    ({"select_one_column": True, "use_answer_as_supervision": True}, True, True),     # WTQ's
    ({"select_one_column": False, "use_answer_as_supervision": True}, True, True),    # WikiSQL's, weak
    ({"select_one_column": False, "use_answer_as_supervision": False}, False, False),  # supervised WikiSQL
    ({}, False, False),
])
def test_a_models_rule_follows_its_config(config, fallback, expected_count):
    import types

    for form in (config, types.SimpleNamespace(**config)):  # A config's JSON (an export's) or the object.
        rule = prediction.DecodingRule.for_model(form)
        assert (rule.threshold, rule.fallback_to_best_cell, rule.expected_count) == (0.5, fallback, expected_count)
    assert prediction.DecodingRule.for_model(config, fallback_to_best_cell=False).fallback_to_best_cell is False
