"""The dual encoder's features: questions alone, tables under their title, and what is cut.

The table below, under the title "pylons", reads (test vocabulary ids in brackets):

    [CLS] pylons [SEP] name height  a 7  b 4
"""

import numpy as np
import pytest

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.retrieval_features import (
    STAT_COLUMNS_CUT,
    STAT_QUESTION_CUT,
    STAT_ROWS_CUT,
    STAT_TITLE_CUT,
    RetrievalFeatures,
    stack_tables,
)
from tests.vocab_fixture import vocab_tokens, write_test_vocab


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> RetrievalFeatures:
    vocab = write_test_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", extra_words=["pylons", "height"])
    return RetrievalFeatures.create(vocab, max_query_length=8, max_table_length=24, max_column_id=8, max_row_id=8)


def _table(header, rows) -> interaction_pb2.Table:
    table = interaction_pb2.Table(table_id="t")
    for name in header:
        table.columns.add(text=name)
    for row in rows:
        table.rows.add().cells.extend(interaction_pb2.Cell(text=cell) for cell in row)
    return table


def _ids(*words):
    vocab = {token: i for i, token in enumerate(vocab_tokens(["pylons", "height"]))}
    return [vocab[w] for w in words]


def test_a_question_is_cls_pieces_sep_padded_to_the_longest(encoder):
    ids, mask, cut = encoder.questions(["name", "what is the name"])
    cls, sep = encoder.tokenizer.cls_id, encoder.tokenizer.sep_id
    assert ids.tolist() == [[cls] + _ids("name") + [sep, 0, 0, 0],
                            [cls] + _ids("what", "is", "the", "name") + [sep]]
    assert mask.tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6]
    assert cut == 0


def test_a_long_question_is_cut_and_counted(encoder):
    ids, mask, cut = encoder.questions(["what is the name of the city with the most points"])
    assert ids.shape == (1, 8)
    assert ids[0, -1] == encoder.tokenizer.sep_id
    assert cut == 11 - 6
    assert encoder.question_ids("a b")[1] == 0
    assert STAT_QUESTION_CUT == "question_pieces_cut"


def test_a_table_reads_title_then_table_with_tapas_token_types(encoder):
    table = encoder.table(_table(["name", "height"], [["a", "7"], ["b", "4"]]), title="pylons")
    f = table.features
    length = int(f["input_mask"].sum())
    cls, sep = encoder.tokenizer.cls_id, encoder.tokenizer.sep_id
    assert f["input_ids"][:length].tolist() == [cls] + _ids("pylons") + [sep] + _ids("name", "height", "a", "7",
                                                                                  "b", "4")
    assert f["segment_ids"][:length].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert f["column_ids"][:length].tolist() == [0, 0, 0, 1, 2, 1, 2, 1, 2]
    assert f["row_ids"][:length].tolist() == [0, 0, 0, 0, 0, 1, 1, 2, 2]
    # 4 < 7: ranks within the height column.
    assert f["column_ranks"][:length].tolist() == [0, 0, 0, 0, 0, 0, 2, 0, 1]
    assert f["input_ids"].shape == (24,)
    assert table.stats == {}


def test_rows_and_columns_that_do_not_fit_are_cut_and_counted(encoder):
    header = [f"c{i}" for i in range(9)]
    rows = [[str(i)] * 9 for i in range(12)]
    table = encoder.table(_table(header, rows), title="pylons")
    assert table.stats[STAT_COLUMNS_CUT] == 9 - 7  # max_column_id 8: ids 1..7.
    assert int(table.features["column_ids"].max()) == 7
    kept = int(table.features["row_ids"].max())
    assert table.stats[STAT_ROWS_CUT] == 12 - kept
    assert 0 < kept < 12


def test_a_long_title_keeps_its_first_words_within_a_quarter_of_the_budget(encoder):
    table = encoder.table(_table(["name"], [["a"]]), title="the city with the most points of all")
    length = int(table.features["input_mask"].sum())
    question_part = table.features["input_ids"][:length][table.features["segment_ids"][:length] == 0]
    assert len(question_part) - 2 <= 24 // 4
    assert table.stats[STAT_TITLE_CUT] == 8 - 6


def test_stack_tables_pads_to_the_longest_real_table(encoder):
    short = encoder.table(_table(["name"], [["a"]]))
    longer = encoder.table(_table(["name", "height"], [["a", "1"], ["b", "2"]]), title="pylons")
    stacked = stack_tables([short, longer])
    assert stacked["input_ids"].shape == (2, int(longer.features["input_mask"].sum()))
    np.testing.assert_array_equal(stacked["row_ids"][1], longer.features["row_ids"][:stacked["row_ids"].shape[1]])
    with pytest.raises(ValueError, match="at least one table"):
        stack_tables([])
