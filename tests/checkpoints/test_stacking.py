"""Stacking a trained model's layers into a deeper model (progressive stacking)."""

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tapas_tf.checkpoints import importer, model_dir as model_dir_lib  # noqa: E402
from tapas_tf.checkpoints.stacking import parse_layer_order, source_name, stack_layers  # noqa: E402
from tapas_tf.models.qa_model import dummy_features  # noqa: E402
from tests.checkpoints.test_compact import _random_model_dir  # noqa: E402


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A tiny two-layer model with random weights everywhere (heads too), and an aggregation head."""
    return _random_model_dir(tmp_path_factory.mktemp("source") / "model")


def _outputs(model_dir):
    model = model_dir_lib.load_model(model_dir)
    features = dummy_features(2, 12)
    features["input_ids"] = np.arange(24, dtype=np.int32).reshape(2, 12) % 30 + 1
    outputs = model(features, training=False)
    return model, {key: outputs[key].numpy() for key in ("token_logits", "aggregation_logits")}


def test_the_identity_order_reproduces_the_source(source, tmp_path):
    out = str(tmp_path / "same")
    assert stack_layers(source, out, "0,1") == [0, 1]
    _, expected = _outputs(source)
    _, got = _outputs(out)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])


def test_a_stacked_model_has_twice_the_layers_each_a_copy(source, tmp_path):
    out = str(tmp_path / "x2")
    stack_layers(source, out, "0,1,0,1")
    assert model_dir_lib.load_config(out).num_hidden_layers == 4
    assert model_dir_lib.load_config(out).replace(num_hidden_layers=2) == model_dir_lib.load_config(source)
    stacked, _ = _outputs(out)
    original = model_dir_lib.load_model(source).weight_map()
    weights = stacked.weight_map()
    assert len(weights) == len(original) + 2 * 16  # two more layers of 16 variables each
    for name, variable in weights.items():
        np.testing.assert_array_equal(variable.numpy(), original[source_name(name, [0, 1, 0, 1])].numpy())
    report = json.load(open(os.path.join(out, importer.REPORT_FILE)))
    assert report["format"] == "stacked" and report["layer_order"] == [0, 1, 0, 1]


def test_layer_names_are_remapped_and_others_kept():
    assert source_name("bert/encoder/layer_2/attention/self/query/kernel", [0, 1, 0, 1]) == \
        "bert/encoder/layer_0/attention/self/query/kernel"
    assert source_name("bert/encoder/layer_10/output/dense/bias", list(range(11))[::-1]) == \
        "bert/encoder/layer_0/output/dense/bias"
    assert source_name("output_weights_agg", [0]) == "output_weights_agg"


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("0,x", "comma-separated"), ("0,2", r"names layers \[2\]"), ("-1", r"names layers \[-1\]")])
def test_bad_layer_orders_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_layer_order(text, 2)


def test_an_output_that_holds_a_model_is_refused(source, tmp_path):
    with pytest.raises(ValueError, match="already holds a model"):
        stack_layers(source, source, "0,1,0,1")
