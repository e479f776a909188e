"""Parity with Hugging Face TAPAS on the fixtures of tests/fixtures/parity, through both importers.

Each case directory holds a tiny random HF TapasForQuestionAnswering (config.json,
model.safetensors), a batch of inputs and HF's outputs (see tests/fixtures/parity/README.md).
For every case:

1. the `hf` importer writes a model directory, `tapas_tf.load_model` reads it, and
   `model(inputs, training=False)` must give HF's logits and every loss term at
   rtol = atol = 1e-4, and exactly HF's predicted cells and operator;
2. the same weights are written as an original TAPAS (TF1, name-based) checkpoint with a
   `bert_config.json` and Adam slots, the `tf1` importer reads them back, and the model must
   give exactly the outputs of step 1.
"""

import functools
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tapas_tf  # noqa: E402
from tapas_tf.checkpoints import (
    importer as ic,  # noqa: E402
    tf1,  # noqa: E402
)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "parity")
CASES = sorted(
    name
    for name in (os.listdir(FIXTURES) if os.path.isdir(FIXTURES) else [])
    if os.path.exists(os.path.join(FIXTURES, name, "model.safetensors"))
)
# Compared at rtol = atol = 1e-4 when the fixture has them (column and aggregation logits exist
# only with select_one_column / an aggregation head).
COMPARED = (
    "token_logits",
    "column_logits",
    "logits",
    "aggregation_logits",
    "selection_loss",
    "aggregation_loss",
    "answer_loss",
    "aggregate_mask",
    "expected_result",
    "total_loss",
)
TOLERANCE = 1e-4


def _inputs(case: str):
    with np.load(os.path.join(FIXTURES, case, "inputs.npz")) as data:
        return {key: tf.constant(data[key]) for key in data.files}


def _reference(case: str):
    with np.load(os.path.join(FIXTURES, case, "outputs.npz")) as data:
        return {key: data[key] for key in data.files}


def _run(model_dir: str, case: str):
    model = tapas_tf.load_model(model_dir)
    return {key: value.numpy() for key, value in model(_inputs(case), training=False).items()}


@functools.lru_cache(maxsize=None)
def _hf_import(case: str, root: str):
    """(model_dir, outputs) of the hf import of `case`, made once per session."""
    model_dir = os.path.join(root, case, "hf_import")
    ic.import_checkpoint("hf", os.path.join(FIXTURES, case), model_dir)
    return model_dir, _run(model_dir, case)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("parity"))


def test_fixtures_exist():
    assert CASES, f"no parity fixtures under {FIXTURES}; run benchmarks/make_parity_fixtures.py"


def _predicted_cells(logits: np.ndarray, input_mask: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(10000) of the masked cells is inf: probability 0.
        probabilities = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    return ((probabilities > 0.5) & (input_mask > 0)).astype(np.int32)


@pytest.mark.parametrize("case", CASES)
def test_hf_import_matches_reference(case, scratch):
    _, outputs = _hf_import(case, scratch)
    reference = _reference(case)
    for key in COMPARED:
        if key in reference:
            assert key in outputs, f"{case}: the model returns no {key}"
            np.testing.assert_allclose(
                outputs[key], reference[key], rtol=TOLERANCE, atol=TOLERANCE, err_msg=f"{case}: {key}"
            )
    input_mask = _inputs(case)["input_mask"].numpy()
    np.testing.assert_array_equal(
        _predicted_cells(outputs["logits"], input_mask),
        reference["predicted_cells"] * (input_mask > 0),
        err_msg=f"{case}: predicted cells",
    )
    if "predicted_aggregation" in reference:
        np.testing.assert_array_equal(
            np.argmax(outputs["aggregation_logits"], axis=-1), reference["predicted_aggregation"],
            err_msg=f"{case}: predicted operator",
        )


@pytest.mark.parametrize("case", CASES)
def test_tf1_import_gives_the_same_outputs(case, scratch):
    hf_dir, hf_outputs = _hf_import(case, scratch)
    model = tapas_tf.load_model(hf_dir)
    config = model.tapas_config
    release = os.path.join(scratch, case, "tf1_release")
    arrays = ic.export_tf1_arrays(model)
    slots = {f"{name}/adam_{m}": np.zeros_like(value) for name, value in arrays.items() for m in "mv"}
    prefix = tf1.write_tf1_checkpoint(
        {**arrays, **slots, "global_step": np.array(100, np.int64)}, os.path.join(release, "model.ckpt")
    )
    bert_config = tf1.bert_config_from_tapas(config)
    with open(os.path.join(release, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(bert_config, f)
    # The original layout: 2-D kernels under the original names, every variable present.
    listed = dict(tf.train.list_variables(prefix))
    assert listed["bert/encoder/layer_0/attention/self/query/kernel"] == [config.hidden_size, config.hidden_size]
    assert listed["bert/encoder/layer_0/attention/output/dense/kernel"] == [config.hidden_size, config.hidden_size]
    assert listed["bert/embeddings/token_type_embeddings_6"] == [config.type_vocab_sizes[6], config.hidden_size]
    assert set(listed) == set(arrays) | set(slots) | {"global_step"}

    # What bert_config.json cannot say comes from --model_options (hidden_act: "gelu" there is tanh).
    options = {key: value for key, value in config.to_dict().items() if key not in bert_config}
    options["hidden_act"] = config.hidden_act
    tf1_dir = os.path.join(scratch, case, "tf1_import")
    ic.import_checkpoint("tf1", release, tf1_dir, model_options=options)
    assert tapas_tf.checkpoints.model_dir.load_config(tf1_dir) == config
    outputs = _run(tf1_dir, case)
    assert sorted(outputs) == sorted(hf_outputs)
    for key, value in outputs.items():
        np.testing.assert_array_equal(value, hf_outputs[key], err_msg=f"{case}: {key}")
