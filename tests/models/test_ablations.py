"""Tests of the embedding ablations (paper Table 7): each switch removes exactly one embedding.

The switches are TapasConfig fields, passed down through TapasEncoder to TapasEmbeddings:

    switch                    table(s) not created              feature(s) no longer embedded
    use_position_embeddings   position_embeddings               (token positions)
    use_column_embeddings     token_type_embeddings_1           column_ids
    use_row_embeddings        token_type_embeddings_2           row_ids
    use_rank_embeddings       token_type_embeddings_4 and _5    column_ranks, inv_column_ranks

Column and row ids still decide positions when `reset_position_index_per_cell` is on, so the
invariance tests below use absolute positions.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.models.config import EMBEDDING_SWITCHES, TapasConfig  # noqa: E402
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES, TapasEmbeddings  # noqa: E402
from tapas_tf.models.pretrain_model import TapasForMaskedLM  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402

TYPE_VOCAB_SIZES = (3, 5, 5, 2, 4, 4, 10)
HIDDEN = 8
SEQ = 10
# switch -> (token-type features it stops embedding, TF1 names of the tables it removes).
SWITCHED = {
    "use_position_embeddings": ((), ("position_embeddings",)),
    "use_column_embeddings": (("column_ids",), ("token_type_embeddings_1",)),
    "use_row_embeddings": (("row_ids",), ("token_type_embeddings_2",)),
    "use_rank_embeddings": (
        ("column_ranks", "inv_column_ranks"),
        ("token_type_embeddings_4", "token_type_embeddings_5"),
    ),
}


def _features(seed: int = 0) -> dict:
    """Random ids for every feature, each within its vocabulary."""
    rng = np.random.default_rng(seed)
    features = {
        name: rng.integers(0, size, (2, SEQ)) for name, size in zip(TOKEN_TYPE_FEATURES, TYPE_VOCAB_SIZES)
    }
    features["input_ids"] = rng.integers(1, 12, (2, SEQ))
    features["input_mask"] = np.ones((2, SEQ))
    return {key: tf.constant(value, tf.int32) for key, value in features.items()}


def _shifted(features: dict, names) -> dict:
    """`features` with the ids of `names` moved to the next id of their vocabulary."""
    sizes = dict(zip(TOKEN_TYPE_FEATURES, TYPE_VOCAB_SIZES))
    return {key: (value + 1) % sizes[key] if key in names else value for key, value in features.items()}


def _layer(**switches) -> TapasEmbeddings:
    tf_keras.utils.set_random_seed(3)
    layer = TapasEmbeddings(
        vocab_size=12,
        hidden_size=HIDDEN,
        max_position_embeddings=16,
        type_vocab_sizes=TYPE_VOCAB_SIZES,
        dropout_rate=0.0,
        reset_position_index_per_cell=False,
        **switches,
    )
    layer(_features())
    return layer


def _changes(layer: TapasEmbeddings, before: dict, after: dict) -> float:
    return float(np.abs(layer(after).numpy() - layer(before).numpy()).max())


@pytest.mark.parametrize("switch", ["use_column_embeddings", "use_row_embeddings", "use_rank_embeddings"])
def test_switched_off_token_type_ignores_its_ids(switch):
    names, _ = SWITCHED[switch]
    features = _features()
    on, off = _layer(), _layer(**{switch: False})
    assert _changes(on, features, _shifted(features, names)) > 1e-3
    assert _changes(off, features, _shifted(features, names)) == 0.0
    # Every other token type still counts.
    for other in TOKEN_TYPE_FEATURES:
        if other not in names:
            assert _changes(off, features, _shifted(features, (other,))) > 1e-3, other


def test_switched_off_positions_make_the_embedding_order_free():
    """Without positions, reversing the tokens reverses the output; with them it does not."""
    features = _features()
    reversed_features = {key: value[:, ::-1] for key, value in features.items()}
    on, off = _layer(), _layer(use_position_embeddings=False)
    np.testing.assert_allclose(off(reversed_features).numpy(), off(features).numpy()[:, ::-1], atol=1e-6)
    assert np.abs(on(reversed_features).numpy() - on(features).numpy()[:, ::-1]).max() > 1e-3
    for name in TOKEN_TYPE_FEATURES:
        assert _changes(off, features, _shifted(features, (name,))) > 1e-3, name


@pytest.mark.parametrize("use_position_embeddings", [True, False])
def test_switched_off_positions_ignore_positions_in_cells(use_position_embeddings):
    """With positions reset per cell and zero column and row tables, cells act only through positions."""
    tf_keras.utils.set_random_seed(4)
    layer = TapasEmbeddings(
        12, HIDDEN, 16, TYPE_VOCAB_SIZES, dropout_rate=0.0, use_position_embeddings=use_position_embeddings
    )
    features = _features()
    layer(features)
    for i in (1, 2):
        layer.token_type_embeddings[i].assign(tf.zeros_like(layer.token_type_embeddings[i]))
    # Every token in cell (1, 1): positions become 0..9 instead of those of the random cells.
    one_cell = {**features, "column_ids": tf.ones_like(features["column_ids"])}
    one_cell["row_ids"] = tf.ones_like(features["row_ids"])
    change = _changes(layer, features, one_cell)
    assert change > 1e-3 if use_position_embeddings else change == 0.0


@pytest.mark.parametrize("switch", sorted(SWITCHED))
def test_variables_differ_only_by_the_switched_off_tables(switch):
    full, ablated = _layer(), _layer(**{switch: False})
    removed = {f"bert/embeddings/{name}" for name in SWITCHED[switch][1]}
    assert set(full.weight_map()) - set(ablated.weight_map()) == removed
    assert set(ablated.weight_map()) < set(full.weight_map())
    assert len(full.weights) - len(ablated.weights) == len(removed)
    assert ablated.disabled_weight_names() == {name: switch for name in removed}
    assert full.disabled_weight_names() == {}


def test_get_config_round_trip_keeps_the_switches():
    layer = _layer(use_position_embeddings=False, use_rank_embeddings=False)
    config = layer.get_config()
    assert config["use_position_embeddings"] is False and config["use_rank_embeddings"] is False
    assert config["use_column_embeddings"] is True and config["use_row_embeddings"] is True
    restored = TapasEmbeddings.from_config(config)
    assert restored.get_config() == config
    clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    clone(_features())
    assert sorted(clone.weight_map()) == sorted(layer.weight_map())


def test_config_switches_default_on_and_round_trip_through_json(tmp_path):
    assert all(getattr(TapasConfig(), switch) is True for switch in EMBEDDING_SWITCHES)
    assert set(EMBEDDING_SWITCHES) == set(SWITCHED)
    config = TapasConfig.from_preset("tiny", use_row_embeddings=False, use_rank_embeddings=False)
    config.to_json_file(str(tmp_path / "config.json"))
    restored = TapasConfig.from_json_file(str(tmp_path / "config.json"))
    assert restored == config and restored.use_row_embeddings is False and restored.use_column_embeddings
    with pytest.raises(ValueError, match="use_column_embeddings must be a bool, got 0"):
        TapasConfig(use_column_embeddings=0)


def _tiny_config(**overrides) -> TapasConfig:
    return tiny_config(vocab_size=12, hidden_size=HIDDEN, num_hidden_layers=1, intermediate_size=16,
                       max_position_embeddings=16, type_vocab_sizes=TYPE_VOCAB_SIZES,
                       num_aggregation_labels=4, **overrides)


@pytest.mark.parametrize("switch", sorted(SWITCHED))
def test_question_answering_model_runs_with_each_switch_off(switch):
    tf_keras.utils.set_random_seed(0)
    config = _tiny_config(**{switch: False})
    model = TapasForQuestionAnswering(config)
    outputs = model(_features(), training=False)
    for key, value in outputs.items():
        assert np.all(np.isfinite(value.numpy())), key
    removed = {f"bert/embeddings/{name}" for name in SWITCHED[switch][1]}
    full = TapasForQuestionAnswering(_tiny_config())
    full(_features())
    assert set(full.weight_map()) - set(model.weight_map()) == removed
    # The Keras config carries the switch, so a rebuilt model has the same variables.
    rebuilt = TapasForQuestionAnswering.from_config(model.get_config())
    assert getattr(rebuilt.tapas_config, switch) is False
    rebuilt(_features())
    assert sorted(rebuilt.weight_map()) == sorted(model.weight_map())


@pytest.mark.parametrize("switch", sorted(SWITCHED))
def test_masked_lm_model_runs_with_each_switch_off(switch):
    tf_keras.utils.set_random_seed(0)
    model = TapasForMaskedLM(_tiny_config(**{switch: False}))
    features = _features()
    features["masked_lm_positions"] = tf.constant([[1, 4], [2, 3]], tf.int32)
    features["masked_lm_ids"] = tf.constant([[6, 7], [9, 10]], tf.int32)
    features["masked_lm_weights"] = tf.constant([[1.0, 1.0], [1.0, 0.0]])
    outputs = model(features, training=True)
    for key, value in outputs.items():
        assert np.all(np.isfinite(value.numpy())), key
    assert not any(name.endswith(SWITCHED[switch][1]) for name in model.weight_map())
