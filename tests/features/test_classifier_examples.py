"""Interaction -> features, checked value by value on hand-drawn tables."""

import math

import numpy as np
import pytest

from tapas_tf.features.classifier_examples import (
    STAT_ANSWER_CELLS_DROPPED,
    STAT_CELLS_TRIMMED,
    STAT_RANKS_CLAMPED,
    STAT_ROWS_DROPPED,
    table_id_hash,
)
from tapas_tf.features.conversion_config import (
    ConversionConfig,
    ConversionError,
    Reason,
)
from tests.conversion_fixtures import make_converter, make_interaction

NAN = math.nan

# | city       | population |
# | paris      | 2          |
# | new london | 4          |
# |            | 2          |
HEADER = ["city", "population"]
ROWS = [["paris", "2"], ["new london", "4"], ["", "2"]]
QUESTIONS = [
    ("how many cities?", [(1, 1)]),
    ("how many cities have population 2?", [(0, 0), (2, 0)], 3, 2.0),
]


@pytest.fixture
def converted(tmp_path):
    converter = make_converter(tmp_path, extra_words=["have"], max_seq_length=20)
    interaction = make_interaction(HEADER, ROWS, QUESTIONS)
    return converter, converter.convert(interaction, 1)


def test_every_feature_of_a_hand_checked_table(converted):
    converter, example = converted
    f = example.features
    tokens = converter.tokenizer.convert_ids_to_tokens(f["input_ids"])
    assert tokens == [
        "[CLS]", "how", "many", "cities", "have", "population", "2", "?", "[SEP]",  # 0-8
        "city", "population",  # 9-10 header
        "paris", "2",  # 11-12 row 1
        "new", "london", "4",  # 13-15 row 2
        "[EMPTY]", "2",  # 16-17 row 3
        "[PAD]", "[PAD]"]
    q = [0] * 9
    pad = [0, 0]
    np.testing.assert_array_equal(f["input_mask"], [1] * 18 + pad)
    np.testing.assert_array_equal(f["segment_ids"], q + [1] * 9 + pad)
    np.testing.assert_array_equal(f["column_ids"], q + [1, 2, 1, 2, 1, 1, 2, 1, 2] + pad)
    np.testing.assert_array_equal(f["row_ids"], q + [0, 0, 1, 1, 2, 2, 2, 3, 3] + pad)
    # Answer cells (0, 0) "paris" and (2, 0) the empty cell.
    np.testing.assert_array_equal(f["label_ids"], q + [0, 0, 1, 0, 0, 0, 0, 1, 0] + pad)
    # The previous question's gold answer: (1, 1) "4".
    np.testing.assert_array_equal(f["prev_label_ids"], q + [0, 0, 0, 0, 0, 0, 1, 0, 0] + pad)
    # Population values 2, 4, 2: dense ranks 1, 2, 1; inverse ranks 2, 1, 2.
    np.testing.assert_array_equal(f["column_ranks"], q + [0, 0, 0, 1, 0, 0, 2, 0, 1] + pad)
    np.testing.assert_array_equal(f["inv_column_ranks"], q + [0, 0, 0, 2, 0, 0, 1, 0, 2] + pad)
    # Question value 2: equal to 2 (EQ bit 1), less than 4 (LT bit 2).
    np.testing.assert_array_equal(f["numeric_relations"], q + [0, 0, 0, 1, 0, 0, 2, 0, 1] + pad)
    np.testing.assert_array_equal(
        f["numeric_values"], [NAN] * 9 + [NAN, NAN, NAN, 2.0, NAN, NAN, 4.0, NAN, 2.0] + [NAN, NAN])
    # "new london" has two tokens, so its tokens are scaled by 2.
    np.testing.assert_array_equal(
        f["numeric_values_scale"], [1.0] * 9 + [1, 1, 1, 1, 2, 2, 1, 1, 1] + [1.0, 1.0])
    assert f["answer"].tolist() == [2.0]
    assert f["aggregation_function_id"].tolist() == [3]
    assert f["classification_class_index"].tolist() == [0]
    assert f["question_id"] == "i_1"
    assert f["table_id"] == "t"
    assert f["table_id_hash"].tolist() == [table_id_hash("t")]
    assert example.stats == {STAT_ROWS_DROPPED: 0, STAT_CELLS_TRIMMED: 0,
                             STAT_RANKS_CLAMPED: 0, STAT_ANSWER_CELLS_DROPPED: 0}


def test_first_question_has_no_previous_answer_and_nan_answer(tmp_path):
    converter = make_converter(tmp_path, max_seq_length=20)
    features = converter.convert(make_interaction(HEADER, ROWS, QUESTIONS), 0).features
    assert features["prev_label_ids"].sum() == 0
    assert math.isnan(features["answer"][0])
    # No number in the question: no relations.
    assert features["numeric_relations"].sum() == 0


def test_explicit_previous_answer_overrides_gold(tmp_path):
    converter = make_converter(tmp_path, extra_words=["have"], max_seq_length=20)
    features = converter.convert(make_interaction(HEADER, ROWS, QUESTIONS), 1,
                                 prev_answer_coordinates=[(0, 1)]).features
    assert np.flatnonzero(features["prev_label_ids"]).tolist() == [12]


def test_cells_are_trimmed_to_the_largest_cap_that_fits(tmp_path):
    # Question "[CLS] hello [SEP]" = 3 tokens; budget 14 - 3 = 11 table tokens.
    header = ["a b c", "d"]  # 3 + 1 tokens
    rows = [["e f g h", "i"], ["j", "k l"]]  # 4 + 1, 1 + 2
    converter = make_converter(tmp_path, max_seq_length=14)
    example = converter.convert(make_interaction(header, rows, [("hello", [])]), 0)
    # Cap 2: 2 + 1 + 2 + 1 + 1 + 2 = 9 <= 11; cap 3: 3 + 1 + 3 + 1 + 1 + 2 = 11 <= 11; cap 4: 12.
    tokens = converter.tokenizer.convert_ids_to_tokens(example.features["input_ids"])
    assert tokens == ["[CLS]", "hello", "[SEP]", "a", "b", "c", "d", "e", "f", "g", "i", "j", "k", "l"]
    assert example.stats[STAT_CELLS_TRIMMED] == 1


def test_trimming_keeps_whole_words(tmp_path):
    # "xyz" is spelled x ##y ##z. Budget 7 - 3 = 4: caps 1 to 3 keep the whole
    # word "xyz" (3 tokens, cost 4); cap 4 adds "b" (cost 5). "x" alone never appears.
    converter = make_converter(tmp_path, max_seq_length=7)
    example = converter.convert(make_interaction(["a"], [["xyz b"]], [("hello", [])]), 0)
    tokens = converter.tokenizer.convert_ids_to_tokens(example.features["input_ids"])
    assert tokens == ["[CLS]", "hello", "[SEP]", "a", "x", "##y", "##z"]
    assert example.stats[STAT_CELLS_TRIMMED] == 1


def test_too_long_without_drop_rows_is_a_counted_error(tmp_path):
    converter = make_converter(tmp_path, max_seq_length=8)
    rows = [["a", "b"]] * 3
    with pytest.raises(ConversionError) as error:
        converter.convert(make_interaction(["c", "d"], rows, [("hello", [])]), 0)
    assert error.value.reason == Reason.SEQUENCE_TOO_LONG


def test_drop_rows_to_fit_drops_trailing_rows(tmp_path):
    converter = make_converter(tmp_path, max_seq_length=9, drop_rows_to_fit=True,
                               fail_on_dropped_answers=False)
    rows = [["a", "b"], ["e", "f"], ["g", "h"]]
    # Budget 6: header 2 + 2 rows of 2.
    example = converter.convert(make_interaction(["c", "d"], rows, [("hello", [(2, 0)])]), 0)
    assert example.features["row_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 2, 2]
    assert example.stats[STAT_ROWS_DROPPED] == 1
    assert example.stats[STAT_ANSWER_CELLS_DROPPED] == 1
    assert example.features["label_ids"].sum() == 0


def test_dropped_answer_fails_training_examples(tmp_path):
    converter = make_converter(tmp_path, max_seq_length=9, drop_rows_to_fit=True)
    rows = [["a", "b"], ["e", "f"], ["g", "h"]]
    with pytest.raises(ConversionError) as error:
        converter.convert(make_interaction(["c", "d"], rows, [("hello", [(2, 0)])]), 0)
    assert error.value.reason == Reason.ANSWER_DROPPED_TO_FIT


def test_too_many_rows_and_columns(tmp_path):
    converter = make_converter(tmp_path, max_row_id=3, max_column_id=3)
    with pytest.raises(ConversionError) as error:
        converter.convert(make_interaction(["a"], [["b"]] * 3, [("hello", [])]), 0)
    assert error.value.reason == Reason.TOO_MANY_ROWS
    with pytest.raises(ConversionError) as error:
        converter.convert(make_interaction(["a", "b", "c"], [["d", "e", "f"]], [("hello", [])]), 0)
    assert error.value.reason == Reason.TOO_MANY_COLUMNS
    dropping = make_converter(tmp_path, max_row_id=3, drop_rows_to_fit=True)
    example = dropping.convert(make_interaction(["a"], [["b"]] * 5, [("hello", [])]), 0)
    assert example.features["row_ids"].max() == 2
    assert example.stats[STAT_ROWS_DROPPED] == 3


def test_ranks_beyond_the_embedding_vocabulary_are_clamped_and_counted(tmp_path):
    # 300 distinct values, descending: row r has rank 300 - r; ranks above 255 clamp to 255.
    rows = [[str(300 - r)] for r in range(300)]
    converter = make_converter(tmp_path, max_seq_length=512, max_row_id=256, drop_rows_to_fit=True)
    example = converter.convert(make_interaction(["a"], rows, [("hello", [])]), 0)
    ranks = example.features["column_ranks"]
    row_ids = example.features["row_ids"]
    # Numbers are spelled digit by digit ("300" = 3 ##0 ##0), so cells have several tokens.
    assert set(ranks[row_ids == 1].tolist()) == {255}  # Rank 300 clamped.
    assert set(ranks[row_ids == 46].tolist()) == {255}  # Rank 255 itself.
    assert set(ranks[row_ids == 47].tolist()) == {254}
    assert example.stats[STAT_RANKS_CLAMPED] == 45  # Rows with rank 256..300.
    assert example.stats[STAT_ROWS_DROPPED] == 300 - row_ids.max()
    assert set(example.features["inv_column_ranks"][row_ids == 1].tolist()) == {1}


def test_question_of_600_word_pieces(tmp_path):
    converter = make_converter(tmp_path)
    question = " ".join(["hello"] * 600)
    with pytest.raises(ConversionError) as error:
        converter.convert(make_interaction(["a"], [["b"]], [(question, [])]), 0)
    assert error.value.reason == Reason.QUESTION_TOO_LONG
    assert "600 word pieces" in str(error.value)


def test_table_of_5000_rows(tmp_path):
    rows = [[str(r), "x"] for r in range(5000)]
    interaction = make_interaction(["a", "b"], rows, [("hello", [(0, 0)])])
    with pytest.raises(ConversionError) as error:
        make_converter(tmp_path).convert(interaction, 0)
    assert error.value.reason == Reason.TOO_MANY_ROWS
    example = make_converter(tmp_path, drop_rows_to_fit=True).convert(interaction, 0)
    assert example.features["row_ids"].max() == 63
    assert example.stats[STAT_ROWS_DROPPED] == 5000 - 63


def test_answer_outside_table_and_invalid_answer(tmp_path):
    converter = make_converter(tmp_path)
    with pytest.raises(ConversionError) as error:
        converter.convert(make_interaction(["a"], [["b"]], [("hello", [(1, 0)])]), 0)
    assert error.value.reason == Reason.ANSWER_OUTSIDE_TABLE
    interaction = make_interaction(["a"], [["b"]], [("hello", [])])
    interaction.questions[0].answer.is_valid = False
    with pytest.raises(ConversionError) as error:
        converter.convert(interaction, 0)
    assert error.value.reason == Reason.INVALID_ANSWER


def test_empty_and_ragged_tables(tmp_path):
    converter = make_converter(tmp_path)
    empty = make_interaction(["a"], [], [("hello", [])])
    with pytest.raises(ConversionError) as error:
        converter.convert(empty, 0)
    assert error.value.reason == Reason.EMPTY_TABLE
    ragged = make_interaction(["a"], [["b"]], [("hello", [])])
    ragged.table.rows[0].cells.add(text="extra")
    with pytest.raises(ConversionError) as error:
        converter.convert(ragged, 0)
    assert error.value.reason == Reason.RAGGED_TABLE


def test_strip_column_names(tmp_path):
    converter = make_converter(tmp_path, strip_column_names=True, max_seq_length=8)
    example = converter.convert(make_interaction(["a", "b"], [["c", "d"]], [("hello", [])]), 0)
    tokens = converter.tokenizer.convert_ids_to_tokens(example.features["input_ids"])
    assert tokens[3:7] == ["[EMPTY]", "[EMPTY]", "c", "d"]


def test_fixed_cell_trim_length(tmp_path):
    converter = make_converter(tmp_path, cell_trim_length=1, max_seq_length=12)
    example = converter.convert(make_interaction(["a b"], [["c d e"]], [("hello", [])]), 0)
    tokens = converter.tokenizer.convert_ids_to_tokens(example.features["input_ids"])
    assert tokens[:6] == ["[CLS]", "hello", "[SEP]", "a", "c", "[PAD]"]


def test_per_table_work_is_cached(tmp_path):
    converter = make_converter(tmp_path, extra_words=["have"], max_seq_length=20)
    interaction = make_interaction(HEADER, ROWS, QUESTIONS)
    list(converter.convert_interaction(interaction))
    assert len(converter._tables) == 1


def test_config_validation():
    with pytest.raises(ValueError, match="max_row_id"):
        ConversionConfig(vocab_file="v", max_row_id=300)
    with pytest.raises(ValueError, match="max_column_id"):
        ConversionConfig(vocab_file="v", max_column_id=1)


def test_cached_table_is_safe_from_later_changes_to_the_callers_message(tmp_path):
    """The converter caches per table content; a caller that changes its Interaction in place after
    converting must not corrupt the cached entry that a later interaction with the first content
    hits (this once raised IndexError in numeric relations)."""
    converter = make_converter(tmp_path)
    one_row = make_interaction(["a", "b"], [["3", "2"]], [("is it 3?", [(0, 0)])])
    expected = converter.convert(one_row, 0).features["numeric_relations"].tolist()
    one_row.table.CopyFrom(make_interaction(["a", "b"], [["1", "2"], ["3", "4"], ["5", "6"]], []).table)
    same_content = make_interaction(["a", "b"], [["3", "2"]], [("is it 3?", [(0, 0)])])
    assert converter.convert(same_content, 0).features["numeric_relations"].tolist() == expected


def test_a_big_table_tokenised_in_blocks_of_rows_is_the_table_tokenised_at_once(tmp_path, monkeypatch):
    """Rows are tokenised a block at a time (memory); texts repeated across blocks share one entry."""
    from tapas_tf.features import cell_pieces

    converter = make_converter(tmp_path, extra_words=["x", "yy", "##z"])
    rows = [["x", f"{i}"] if i % 2 else ["yyz", "x y"] for i in range(7)]
    table = make_interaction(["a", "b"], rows, []).table

    def tokenised():
        header, pieces, cell_texts = cell_pieces.tokenize_table(converter.tokenizer, table, False)
        cells = [[pieces.cell(int(t)) for t in row] for row in cell_texts]
        return [[(c.ids, c.word_starts.tolist()) for c in row] for row in [header] + cells], pieces, cell_texts

    whole, _, _ = tokenised()
    monkeypatch.setattr(cell_pieces, "_TOKENIZE_ROWS", 2)
    blocks, pieces, cell_texts = tokenised()
    assert len(blocks) == 8 and all(len(row) == 2 for row in blocks)
    assert blocks == whole
    assert cell_texts.shape == (7, 2) and cell_texts[0, 0] == cell_texts[6, 0]  # "yyz" in the first and last block.
    assert len(pieces) == 6  # yyz, "x y", x, 1, 3, 5: each distinct text once.
    assert blocks[1][0][1] == [0, 2]  # yy ##z: one word of two pieces.


def test_cell_pieces_trimmed_lengths_keep_whole_words():
    """Under a cap of k pieces a text keeps every piece of a word that starts before position k."""
    from tapas_tf.features.cell_pieces import CellPieces

    # Texts: [a ##b c] (words start 0, 2), [d] (0), [e ##f ##g h ##i] (0, 3), [] (the empty list).
    ids = np.arange(9, dtype=np.int32)
    starts = np.asarray([0, 2, 3, 0, 1, 0, 3, 5, 0], np.int32)  # Each text's starts, then its length.
    pieces = CellPieces(ids, np.asarray([0, 3, 4, 9, 9]), starts, np.asarray([0, 3, 5, 8, 9]))
    assert pieces.lengths.tolist() == [3, 1, 5, 0]
    assert pieces.trimmed(1).tolist() == [2, 1, 3, 0]
    assert pieces.trimmed(2).tolist() == [2, 1, 3, 0]
    assert pieces.trimmed(3).tolist() == [3, 1, 3, 0]
    assert pieces.trimmed(4).tolist() == [3, 1, 5, 0]
    assert pieces.cell(2).ids == [4, 5, 6, 7, 8] and pieces.cell(2).word_starts.tolist() == [0, 3, 5]
    for cap in range(1, 6):
        assert pieces.trimmed(cap).tolist() == [pieces.cell(t).trimmed_length(cap) for t in range(4)]
    by_cap = pieces.trimmed_by_cap(6)
    assert by_cap.shape == (4, 6)
    assert by_cap.T.tolist() == [pieces.trimmed(cap).tolist() for cap in range(1, 7)]


def _ranks_and_relations(converter, interaction):
    encoded = converter.encoded_table(interaction.table)
    question = interaction.questions[0]
    return encoded.ranks.tolist(), encoded.inv_ranks.tolist(), encoded.cell_relations(question).tolist()


def test_number_columns_are_ranked_and_compared_by_array_work_exactly_as_by_sort_key(tmp_path, monkeypatch):
    """Numbers-only columns take an array path; forcing every column through the sort-key path (as
    dates and mixed columns go) gives the very same ranks and relations."""
    from tapas_tf.features import table_encoding

    header = ["n", "when", "mixed", "text"]
    rows = [["3", "1 may 2010", "3", "a"], ["-1.5", "2012", "june 2011", "b"], ["3", "", "7", ""],
            ["", "3 march 2009", "x", "c"], ["1,000", "2011", "2", "d"], ["16777217", "2010", "", "e"],
            ["16777216", "1999", "1", "f"]]
    interaction = make_interaction(header, rows, [("is it more than 3 or 2011 or 16777216?", [(0, 0)])])
    fast = _ranks_and_relations(make_converter(tmp_path), interaction)
    monkeypatch.setattr(table_encoding, "_numbers_only", lambda numbers, kinds: False)
    assert _ranks_and_relations(make_converter(tmp_path), interaction) == fast
    ranks, inv, relations = fast
    # The Interaction format stores a number as a float32, as the original's: 16777217 is 16777216.
    assert [row[0] for row in ranks] == [2, 1, 2, 0, 3, 4, 4]
    assert [row[0] for row in inv] == [3, 4, 3, 0, 2, 1, 1]
    eq, lt, gt = 1, 2, 4  # Question 3 against the first column: 3 == 3; 3 > -1.5; 3 < 1,000.
    assert relations[0] & eq and relations[1 * 4] & gt and relations[4 * 4] & lt
