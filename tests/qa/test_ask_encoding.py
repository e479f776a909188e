"""The ask path's encoder (tapas_tf/qa/ask_encoding.py): what a question costs on a table that fits.

A table that fits is neither ranked nor copied per question (ranking reads every cell, and was
most of a question's encoding time on a small table); the features are the very ones the general
path (rank the rows, cut the table to them) gives. A table that does not fit is still cut to its
most related rows. No model: the encoder and a test vocabulary only.
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.qa import ask_encoding, pruning
from tapas_tf.qa.ask_encoding import BUCKETS, TableEncoder, bucket_length
from tests.vocab_fixture import write_test_vocab

CITIES = pd.DataFrame({"city": ["paris", "london", "berlin"], "population": ["2", "9", "4"],
                       "country": ["france", "england", "germany"]})


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    write_test_vocab(str(path))
    return str(path)


def encoder(vocab, max_seq_length=512, max_row_id=256, max_column_id=256):
    config = ConversionConfig(vocab_file=vocab, max_seq_length=max_seq_length, max_row_id=max_row_id,
                              max_column_id=max_column_id, fail_on_dropped_answers=False)
    return TableEncoder(config)


def general_path(monkeypatch):
    """Makes the encoder cut every table, as it did before the whole-table path: rows ranked,
    then the table copied to the kept (here: all) rows and columns."""
    monkeypatch.setattr(pruning, "unpruned", lambda table: pruning.subset(
        table, range(len(table.rows)), range(len(table.columns))))


def assert_same_encoding(ours, theirs):
    assert ours.features.keys() == theirs.features.keys()
    for name, value in ours.features.items():
        np.testing.assert_array_equal(value, theirs.features[name], err_msg=name)
    assert (ours.real_length, ours.stats, ours.diagnostics) == (theirs.real_length, theirs.stats, theirs.diagnostics)
    assert (ours.pruned.rows, ours.pruned.columns, ours.pruned.is_pruned) == (
        theirs.pruned.rows, theirs.pruned.columns, theirs.pruned.is_pruned)
    # The same cells (the cut copy also sets the empty title, caption and address fields).
    assert list(ours.pruned.table.columns) == list(theirs.pruned.table.columns)
    assert list(ours.pruned.table.rows) == list(theirs.pruned.table.rows)


@pytest.mark.parametrize("question, previous", [("which city has population 4?", None),
                                                ("which of them is in germany?", [(0, 0), (2, 0)])])
def test_a_table_that_fits_is_neither_ranked_nor_copied_and_encodes_as_before(vocab, monkeypatch, question,
                                                                                previous):
    fast = encoder(vocab)
    prepared = fast.prepare(CITIES)

    def no_ranking(*args):
        raise AssertionError("a table that fits was ranked")

    with monkeypatch.context() as patched:
        patched.setattr(pruning, "rank_rows", no_ranking)
        ours = fast.encode(prepared, question, previous)
    assert ours.pruned.table is prepared.table  # The prepared table itself: no copy per question.
    general_path(monkeypatch)
    theirs = encoder(vocab).encode(prepared, question, previous)
    assert_same_encoding(ours, theirs)
    assert ours.features["prev_label_ids"].sum() == (2 if previous else 0)


def test_a_table_too_long_for_the_sequence_is_still_cut_to_its_most_related_rows(vocab):
    # 8 rows within the row limit, but 36 table tokens where 25 are left after the question: the
    # 5 rows that fit are the 2 that name a country of the question, then the first ones.
    cities = ["paris", "london", "berlin", "paris", "london", "berlin", "france", "germany"]
    frame = pd.DataFrame({"place": cities, "a": ["red"] * 8, "b": ["blue"] * 8, "c": ["green"] * 8})
    tight = encoder(vocab, max_seq_length=32)
    encoded = tight.encode(tight.prepare(frame), "which germany or france?")
    assert encoded.pruned.rows == (0, 1, 2, 6, 7) and encoded.real_length == 31
    assert "pruned to the 5 of 8 rows" in " ".join(encoded.diagnostics)


def test_rows_beyond_the_row_limit_are_ranked(vocab):
    frame = pd.DataFrame({"city": ["paris", "london", "berlin", "paris", "london"]})
    small = encoder(vocab, max_row_id=3)  # At most 2 body rows.
    encoded = small.encode(small.prepare(frame), "which berlin?")
    assert encoded.pruned.rows == (0, 2)  # berlin, the only related row, then the first on ties.


def test_a_question_pads_to_the_next_bucket_of_32_tokens_up_to_256():
    assert BUCKETS == (32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
    assert [bucket_length(n, BUCKETS) for n in (1, 32, 33, 213, 225, 257, 512)] == [32, 32, 64, 224, 256, 320, 512]
    with pytest.raises(ValueError, match="do not fit"):
        bucket_length(513, BUCKETS)
    assert ask_encoding.bucket_length is bucket_length


def test_the_encoder_uses_the_buckets_below_its_sequence_length(vocab):
    assert encoder(vocab, max_seq_length=200).buckets == (32, 64, 96, 128, 160, 192, 200)
    short = encoder(vocab)
    encoded = short.encode(short.prepare(CITIES), "which city?")
    assert len(encoded.features["input_ids"]) == 32 >= encoded.real_length


def test_encoders_that_convert_alike_share_one_converter_and_its_tables(vocab, tmp_path):
    """The two models of a pair read one vocabulary from two files: a big table is tokenised once."""
    import shutil

    copy = str(tmp_path / "vocab_copy.txt")
    shutil.copy(vocab, copy)
    first, second = encoder(vocab), TableEncoder(dataclasses.replace(encoder(vocab).config, vocab_file=copy))
    assert second.share_tables(first)
    assert second.converter is first.converter and second._lock is first._lock
    prepared = first.prepare(pd.DataFrame({"a": ["1", "2"], "b": ["x", "y"]}))
    first.encode(prepared, "what is a?")
    second.encode(prepared, "what is b?")
    assert len(first.converter._tables) == 1

    assert not encoder(vocab, max_seq_length=256).share_tables(encoder(vocab))  # Other options.
    with open(copy, "a", encoding="utf-8") as f:
        f.write("extraword\n")
    assert not TableEncoder(dataclasses.replace(encoder(vocab).config, vocab_file=copy)).share_tables(encoder(vocab))


def test_asking_again_about_the_same_frame_does_not_remake_its_cells(vocab, monkeypatch):
    """The second question about a frame finds its prepared table by the frame's values
    (`frame_fingerprint`), without making a protobuf of every cell again; a changed cell, another
    table id or a frame whose texts pandas cannot hash (dates) still gets the right table."""
    made = []
    original = ask_encoding.table_from_frame
    monkeypatch.setattr(ask_encoding, "table_from_frame", lambda *a, **k: made.append(1) or original(*a, **k))
    enc = encoder(vocab)
    first = enc.prepare(CITIES)
    assert enc.prepare(CITIES.copy()) is first and len(made) == 1
    changed = CITIES.copy()
    changed.iloc[1, 1] = "7"
    again = enc.prepare(changed)
    assert again is not first and again.table.rows[1].cells[1].text == "7" and len(made) == 2
    assert enc.prepare(CITIES, table_id="other") is not first
    dated = pd.DataFrame({"day": [pd.Timestamp("2020-01-02")], "n": [1]})
    assert enc.prepare(dated).table.rows[0].cells[0].text == "2020-01-02"
    assert enc.prepare(dated).table.rows[0].cells[0].text == "2020-01-02"  # By its cells' texts.


def test_a_frame_fingerprint_is_of_values_order_and_types():
    from tapas_tf.data.table_files import frame_fingerprint

    key = frame_fingerprint(CITIES)
    assert key is not None and frame_fingerprint(CITIES.copy()) == key
    assert frame_fingerprint(CITIES[["population", "city", "country"]]) != key
    assert frame_fingerprint(CITIES.rename(columns={"city": "town"})) != key
    numbers = pd.DataFrame({"a": [1, 2], "b": [0.5, -0.0], "c": [True, False]})
    assert frame_fingerprint(numbers) is not None
    assert frame_fingerprint(numbers.astype({"a": float})) != frame_fingerprint(numbers)  # The same texts ("1"), another key: one more conversion.
    assert frame_fingerprint(pd.DataFrame({"a": [1, "x"]})) is None  # Mixed objects: by their texts.
    assert frame_fingerprint(pd.DataFrame({"a": [pd.Timestamp("2020-01-01")]})) is None
