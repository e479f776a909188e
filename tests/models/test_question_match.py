"""Tests of the question-match embeddings: the word pieces a question and its table share.

    question  [CLS] which city  ,   paris  [SEP]  city  paris  berlin  ,   [PAD]
    segment     0     0     0   0     0      0     1     1      1      1    0
    match       0     0     2   0     2      0     1     1      0      0    0

"which" is a function word, "," punctuation, [CLS] and [SEP] special: none of them ever match.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.features.question_match import ignored_ids, is_ignored_piece  # noqa: E402
from tapas_tf.features.vocab import load_vocab  # noqa: E402
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.embeddings import (  # noqa: E402
    TOKEN_TYPE_FEATURES, TapasEmbeddings, countable_pieces, question_match_ids)
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402
from tests.vocab_fixture import write_test_vocab  # noqa: E402


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = write_test_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt"))
    return path, {piece: i for i, piece in enumerate(load_vocab(path))}


def _ids(ids, pieces):
    return [ids[piece] for piece in pieces]


def test_matches_on_a_hand_checked_example(vocab):
    path, ids = vocab
    pieces = ["[CLS]", "which", "city", ",", "paris", "[SEP]", "city", "paris", "berlin", ",", "[PAD]"]
    segments = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    countable = countable_pieces(len(ids), ignored_ids(path))
    matches = question_match_ids(tf.constant([_ids(ids, pieces)]), tf.constant([segments]), countable)
    assert matches.numpy().tolist() == [[0, 0, 2, 0, 2, 0, 1, 1, 0, 0, 0]]


def test_ignored_pieces_repeats_and_padding_never_match():
    # Ids: 0 [PAD], 1 ignored, 5..9 words. Id 7 occurs twice in the table only; id 1 on both sides.
    input_ids = tf.constant([[3, 1, 5, 4, 1, 7, 7, 5, 5, 0, 0],
                             [3, 6, 6, 4, 8, 9, 0, 0, 0, 0, 0]])
    segments = tf.constant([[0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0],
                            [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]])
    matches = question_match_ids(input_ids, segments, countable_pieces(10, [1, 3, 4]))
    assert matches.numpy().tolist() == [[0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0],
                                        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]


def test_the_ignored_pieces_of_a_vocabulary(vocab):
    path, ids = vocab
    ignored = set(ignored_ids(path))
    for piece in ["[PAD]", "[EMPTY]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",", "?", "the", "which", "how", "many",
                  "##s", "##ing", "##est"]:
        assert ids[piece] in ignored, piece
    for piece in ["city", "paris", "total", "gold", "first", "2", "medals"]:
        assert ids[piece] not in ignored, piece
    assert list(ignored_ids(path)) == sorted(ignored)
    assert is_ignored_piece("—") and is_ignored_piece("##ly") and not is_ignored_piece("##land")


def _layer(**options) -> TapasEmbeddings:
    tf_keras.utils.set_random_seed(3)
    layer = TapasEmbeddings(vocab_size=12, hidden_size=8, max_position_embeddings=16,
                            type_vocab_sizes=(3, 5, 5, 2, 4, 4, 10), dropout_rate=0.0, **options)
    layer(_features())
    return layer


def _features() -> dict:
    features = {name: tf.zeros((1, 6), tf.int32) for name in TOKEN_TYPE_FEATURES}
    features["input_ids"] = tf.constant([[3, 7, 4, 7, 8, 0]])
    features["segment_ids"] = tf.constant([[0, 0, 0, 1, 1, 0]])
    return features


def test_the_table_adds_only_its_rows_to_the_sum():
    on, off = _layer(use_question_match_embeddings=True, question_match_ignored_ids=[3, 4]), _layer()
    assert set(on.weight_map()) - set(off.weight_map()) == {"bert/embeddings/question_match_embeddings"}
    assert on.weight_map()["bert/embeddings/question_match_embeddings"].shape == (3, 8)
    for name, variable in off.weight_map().items():
        on.weight_map()[name].assign(variable)
    table = on.question_match_embeddings
    table.assign(tf.zeros_like(table))
    np.testing.assert_allclose(on(_features()).numpy(), off(_features()).numpy(), atol=1e-6)
    # Row 1 (a table token in the question) moves only token 3, row 2 only token 1.
    table.assign([[0.0] * 8, [1.0, -1.0] * 4, [0.0] * 8])
    moved = np.abs(on(_features()).numpy() - off(_features()).numpy()).max(axis=-1)[0]
    assert [bool(m > 1e-3) for m in moved] == [False, False, False, True, False, False]
    table.assign([[0.0] * 8, [0.0] * 8, [1.0, -1.0] * 4])
    moved = np.abs(on(_features()).numpy() - off(_features()).numpy()).max(axis=-1)[0]
    assert [bool(m > 1e-3) for m in moved] == [False, True, False, False, False, False]


def test_the_layer_config_round_trips():
    layer = _layer(use_question_match_embeddings=True, question_match_ignored_ids=(4, 3))
    config = layer.get_config()
    assert config["use_question_match_embeddings"] is True and config["question_match_ignored_ids"] == [4, 3]
    assert TapasEmbeddings.from_config(config).get_config() == config


def test_the_model_config_round_trips_and_checks_the_ids(tmp_path):
    config = tiny_config(use_question_match_embeddings=True, question_match_ignored_ids=[0, 5, 9])
    assert config.question_match_ignored_ids == (0, 5, 9)
    config.to_json_file(str(tmp_path / "config.json"))
    assert TapasConfig.from_json_file(str(tmp_path / "config.json")) == config
    assert TapasConfig().use_question_match_embeddings is False
    with pytest.raises(ValueError, match="question_match_ignored_ids must be word-piece ids"):
        tiny_config(question_match_ignored_ids=[config.vocab_size])
    with pytest.raises(ValueError, match="question_match_ignored_ids must be a sequence"):
        tiny_config(question_match_ignored_ids="5")
    with pytest.raises(ValueError, match="use_question_match_embeddings must be a bool"):
        tiny_config(use_question_match_embeddings="yes")


def test_a_model_saves_and_restores_the_table(tmp_path):
    config = tiny_config(use_question_match_embeddings=True, question_match_ignored_ids=[1, 2])
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8))
    assert "bert/embeddings/question_match_embeddings" in model.weight_map()
    prefix = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    restored = TapasForQuestionAnswering(config)
    restored(dummy_features(1, 8))
    tf.train.Checkpoint(model=restored).restore(prefix).assert_existing_objects_matched()
    np.testing.assert_array_equal(restored.weight_map()["bert/embeddings/question_match_embeddings"].numpy(),
                                  model.weight_map()["bert/embeddings/question_match_embeddings"].numpy())
