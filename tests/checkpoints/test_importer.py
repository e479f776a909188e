"""Tests of tapas_tf.checkpoints.importer and tapas_tf.checkpoints on checkpoints written here.

Every checkpoint is made from a tiny tapas-tf model whose variables are all set to distinct
random values, written in the source format (HF safetensors, TF1 name-based checkpoint), then
imported; the imported variables must equal the originals exactly, so a transposed, swapped or
dropped tensor fails.
"""

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import tapas_tf  # noqa: E402
from tapas_tf.checkpoints import hf, importer as ic, names, tf1  # noqa: E402
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tests.command_runner import run_command  # noqa: E402

TINY = dict(
    vocab_size=20,
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=12,
    max_position_embeddings=16,
    type_vocab_sizes=(3, 5, 6, 2, 4, 4, 3),
)


def _random_model(config: TapasConfig, target: str = "qa", nsp: bool = False, seed: int = 0):
    """A built model whose every variable holds distinct random values."""
    model = ic.build_model(config, target, nsp)
    rng = np.random.default_rng(seed)
    for variable in model.weight_map().values():
        variable.assign(rng.normal(size=variable.shape).astype(np.float32))
    return model


def _hf_config(config: TapasConfig, **extra) -> dict:
    """config.json as HF writes it: our fields with HF's activation name, plus generic keys."""
    values = config.to_dict()
    values["hidden_act"] = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}[config.hidden_act]
    values.pop("num_classification_labels")
    values.update(model_type="tapas", architectures=["TapasForQuestionAnswering"], pad_token_id=0,
                  use_gumbel_for_cells=False, id2label={"0": "LABEL_0", "1": "LABEL_1"})
    values.update(extra)
    return values


def _write_hf(directory, tensors: dict, config_values: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_values, f)
    return str(directory)


def _assert_same_weights(expected_model, actual_model, skip=()):
    expected = expected_model.weight_map()
    actual = actual_model.weight_map()
    assert sorted(expected) == sorted(actual)
    for name in expected:
        if name not in skip:
            np.testing.assert_array_equal(actual[name].numpy(), expected[name].numpy(), err_msg=name)


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hf_name, prefix, expected",
    [
        ("tapas.encoder.layer.1.attention.self.query.weight", "tapas.",
         ("bert/encoder/layer_1/attention/self/query/kernel", True)),
        ("tapas.encoder.layer.0.attention.output.LayerNorm.bias", "tapas.",
         ("bert/encoder/layer_0/attention/output/LayerNorm/beta", False)),
        ("encoder.layer.3.output.dense.bias", "", ("bert/encoder/layer_3/output/dense/bias", False)),
        ("embeddings.LayerNorm.gamma", "", ("bert/embeddings/LayerNorm/gamma", False)),
        ("tapas.embeddings.token_type_embeddings_6.weight", "tapas.",
         ("bert/embeddings/token_type_embeddings_6", False)),
        ("bert.embeddings.token_type_embeddings.weight", "bert.", ("bert/embeddings/token_type_embeddings", False)),
        ("tapas.pooler.dense.weight", "tapas.", ("bert/pooler/dense/kernel", True)),
        ("aggregation_classifier.weight", "tapas.", ("output_weights_agg", False)),
        ("classifier.bias", "tapas.", ("output_bias_cls", False)),
        ("column_output_bias", "tapas.", ("column_output_bias", False)),
        ("cls.predictions.transform.dense.weight", "tapas.", ("cls/predictions/transform/dense/kernel", True)),
        ("cls.predictions.transform.LayerNorm.weight", "tapas.", ("cls/predictions/transform/LayerNorm/gamma", False)),
        ("cls.predictions.bias", "tapas.", ("cls/predictions/output_bias", False)),
        ("tapas.encoder.layer.0.attention.self.rotary.weight", "tapas.", None),
        ("tapas.embeddings.position_ids", "tapas.", None),
        ("lm_head.weight", "tapas.", None),
    ],
)
def test_hf_to_tf1_names(hf_name, prefix, expected):
    assert names.hf_to_tf1(hf_name, prefix) == expected


def test_tf1_to_hf_inverts_hf_to_tf1_for_every_variable():
    config = TapasConfig(**TINY, num_aggregation_labels=4, num_classification_labels=3)
    qa = ic.build_model(config, "qa")
    mlm = ic.build_model(config, "mlm", use_next_sentence_prediction=True)
    all_names = set(qa.weight_map()) | set(mlm.weight_map())
    assert len(all_names) == 7 + 4 + 2 * 16 + 2 + 8 + 5 + 2  # embeddings, LN, layers, pooler, heads, mlm, nsp
    for prefix in ("tapas.", ""):
        for name in all_names:
            hf_name, transpose = names.tf1_to_hf(name, prefix)
            assert names.hf_to_tf1(hf_name, prefix) == (name, transpose)


def test_tf1_shape_of_attention_variables():
    # H = 8, N = 2, D = 4.
    assert names.tf1_shape("bert/encoder/layer_0/attention/self/query/kernel", (8, 2, 4)) == (8, 8)
    assert names.tf1_shape("bert/encoder/layer_0/attention/self/key/bias", (2, 4)) == (8,)
    assert names.tf1_shape("bert/encoder/layer_0/attention/output/dense/kernel", (2, 4, 8)) == (8, 8)
    assert names.tf1_shape("bert/encoder/layer_0/intermediate/dense/kernel", (8, 12)) == (8, 12)
    assert names.tf1_shape("output_weights_agg", (4, 8)) == (4, 8)


# --- HF config ---------------------------------------------------------------------------------


def test_hf_config_fields_are_carried_over():
    values = {
        "model_type": "tapas", "hidden_act": "gelu_pytorch_tanh", "hidden_size": 16, "num_attention_heads": 2,
        "layer_norm_eps": 1e-6, "type_vocab_sizes": [3, 9, 9, 2, 9, 9, 10], "max_position_embeddings": 40,
        "reset_position_index_per_cell": False, "select_one_column": False, "allow_empty_column_selection": True,
        "average_logits_per_cell": True, "positive_label_weight": 7.0, "num_aggregation_labels": 4,
        "aggregation_temperature": 0.8, "temperature": 0.6, "huber_loss_delta": 0.25, "answer_loss_cutoff": 0.4,
        "cell_selection_preference": 0.2, "average_approximation_function": "second_order",
        "use_answer_as_supervision": True, "aggregation_loss_weight": 1.3, "answer_loss_importance": 0.5,
        "use_normalized_answer_loss": True, "disable_per_token_loss": True, "max_num_rows": 10,
        "max_num_columns": 5, "init_cell_selection_weights_to_zero": True,
        "aggregation_labels": {"0": "NONE", "1": "SUM"}, "use_cache": True, "torchscript": False,
    }
    config, notes = hf.tapas_config_from_hf(values)
    for key, value in values.items():
        if key in ("hidden_act", "type_vocab_sizes"):
            continue
        if hasattr(config, key):
            assert getattr(config, key) == value, key
    assert config.hidden_act == "gelu_tanh"
    assert config.type_vocab_sizes == (3, 9, 9, 2, 9, 9, 10)
    assert notes == ["ignored aggregation_labels={'0': 'NONE', '1': 'SUM'} (labels only)"]


@pytest.mark.parametrize("act, ours", [("gelu", "gelu"), ("gelu_new", "gelu_tanh"), ("gelu_fast", "gelu_tanh"),
                                       ("relu", "relu")])
def test_hf_activation_names(act, ours):
    assert hf.tapas_config_from_hf({"hidden_act": act})[0].hidden_act == ours


def test_hf_defaults_and_null_supervision():
    config, _ = hf.tapas_config_from_hf({"use_answer_as_supervision": None, "huber_loss_delta": None})
    assert config == TapasConfig()


@pytest.mark.parametrize(
    "values, message",
    [
        ({"hidden_act": "swish"}, "Unsupported hidden_act 'swish'"),
        ({"use_gumbel_for_cells": True}, "use_gumbel_for_cells=True"),
        ({"model_type": "bert"}, "model_type 'bert'"),
        ({"num_aggregation_labels": 4, "use_answer_as_supervision": True, "huber_loss_delta": 1.0},
         "cell_selection_preference"),
    ],
)
def test_hf_config_errors(values, message):
    with pytest.raises(ValueError, match=message):
        hf.tapas_config_from_hf(values)


def test_sequence_classification_config_sizes_the_classifier():
    config, _ = hf.tapas_config_from_hf(
        {"architectures": ["TapasForSequenceClassification"], "id2label": {"0": "a", "1": "b", "2": "c"}}
    )
    assert config.num_classification_labels == 3


# --- HF import ---------------------------------------------------------------------------------


def test_hf_import_round_trip_is_exact(tmp_path):
    config = TapasConfig(**TINY, num_aggregation_labels=4, hidden_act="gelu_tanh", reset_position_index_per_cell=False)
    model = _random_model(config)
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(model), "tapas.")
    tensors["tapas.embeddings.position_ids"] = np.arange(16, dtype=np.int64)[None]
    source = _write_hf(tmp_path / "hf", tensors, _hf_config(config, aggregation_labels={"0": "NONE"}))
    with open(os.path.join(source, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("[PAD]\n")

    report = ic.import_checkpoint("hf", source, str(tmp_path / "out"))

    assert report["mapped"] == 51 and report["fresh"] == [] and report["model_class"] == "TapasForQuestionAnswering"
    assert "skipped buffer tapas.embeddings.position_ids" in report["notes"]
    assert tapas_tf.checkpoints.model_dir.latest_checkpoint(str(tmp_path / "out")).endswith("ckpt-0")
    assert os.path.exists(tmp_path / "out" / "vocab.txt")
    loaded = tapas_tf.load_model(str(tmp_path / "out"))
    assert loaded.tapas_config == config
    _assert_same_weights(model, loaded)


def test_hf_import_refuses_unused_and_missing_tensors(tmp_path):
    config = TapasConfig(**TINY)
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(_random_model(config)), "tapas.")
    tensors["lm_head.weight"] = np.zeros((2, 8), np.float32)
    del tensors["tapas.encoder.layer.1.output.dense.bias"]
    source = _write_hf(tmp_path / "hf", tensors, _hf_config(config))
    with pytest.raises(ValueError) as error:
        ic.import_checkpoint("hf", source, str(tmp_path / "out"), skip_heads=True)
    assert "does not set: bert/encoder/layer_1/output/dense/bias;" in str(error.value)
    assert "nothing uses: lm_head.weight." in str(error.value)
    assert not os.path.exists(tmp_path / "out")


def test_hf_tapas_model_layout_needs_skip_heads(tmp_path):
    config = TapasConfig(**TINY)
    model = _random_model(config)
    encoder_only = {n: v for n, v in ic.export_tf1_arrays(model).items() if n.startswith("bert/")}
    source = _write_hf(tmp_path / "hf", hf.canonical_to_hf(encoder_only, ""), _hf_config(config))
    with pytest.raises(ValueError, match="does not set: column_output_bias, column_output_weights, output_bias, "
                                         "output_weights.$"):
        ic.import_checkpoint("hf", source, str(tmp_path / "refused"))

    report = ic.import_checkpoint("hf", source, str(tmp_path / "out"), skip_heads=True)

    assert report["fresh"] == ["column_output_bias", "column_output_weights", "output_bias", "output_weights"]
    _assert_same_weights(model, tapas_tf.load_model(str(tmp_path / "out")), skip=report["fresh"])


def test_hf_shape_mismatch_is_refused(tmp_path):
    config = TapasConfig(**TINY)
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(_random_model(config)), "tapas.")
    tensors["tapas.encoder.layer.0.intermediate.dense.weight"] = np.zeros((8, 12), np.float32)  # not transposed
    source = _write_hf(tmp_path / "hf", tensors, _hf_config(config))
    with pytest.raises(ValueError, match=r"intermediate/dense/kernel \(12, 8\) != \(8, 12\)"):
        ic.import_checkpoint("hf", source, str(tmp_path / "out"))


def test_hf_column_head_is_dropped_without_select_one_column(tmp_path):
    config = TapasConfig(**TINY, select_one_column=False)
    model = _random_model(config)
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(model), "tapas.")
    tensors.update(column_output_weights=np.ones(8, np.float32), column_output_bias=np.float32(0.5) * np.ones(()))
    source = _write_hf(tmp_path / "hf", {k: np.asarray(v, np.float32) for k, v in tensors.items()}, _hf_config(config))

    report = ic.import_checkpoint("hf", source, str(tmp_path / "out"))

    assert "dropped column_output_weights: unused with select_one_column=false" in report["notes"]
    _assert_same_weights(model, tapas_tf.load_model(str(tmp_path / "out")))


def test_hf_masked_lm_layout_builds_a_masked_lm_model(tmp_path):
    config = TapasConfig(**TINY)
    model = _random_model(config, "mlm")
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(model), "tapas.")
    tensors["cls.predictions.decoder.weight"] = tensors["tapas.embeddings.word_embeddings.weight"].copy()
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"].copy()
    source = _write_hf(tmp_path / "hf", tensors, _hf_config(config, architectures=["TapasForMaskedLM"]))

    report = ic.import_checkpoint("hf", source, str(tmp_path / "out"))

    assert report["model_class"] == "TapasForMaskedLM" and report["mapped"] == 11 + 32 + 5  # no pooler
    restored = ic.build_model(config, "mlm")
    tf.train.Checkpoint(model=restored).restore(tapas_tf.checkpoints.model_dir.latest_checkpoint(str(tmp_path / "out"))
                                                ).assert_existing_objects_matched()
    _assert_same_weights(model, restored)

    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.decoder.bias"] + 1.0
    untied = _write_hf(tmp_path / "untied", tensors, _hf_config(config))
    with pytest.raises(ValueError, match="cls.predictions.decoder.bias is not tied"):
        ic.import_checkpoint("hf", untied, str(tmp_path / "out2"))


def test_masked_lm_checkpoint_into_qa_model_drops_mlm_head_with_skip_heads(tmp_path):
    config = TapasConfig(**TINY)
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(_random_model(config, "mlm")), "tapas.")
    source = _write_hf(tmp_path / "hf", tensors, _hf_config(config))
    report = ic.import_checkpoint("hf", source, str(tmp_path / "out"), skip_heads=True, target="qa")
    assert report["dropped"] == [
        "cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
        "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
        "cls/predictions/transform/dense/kernel",
    ]
    assert "bert/pooler/dense/kernel" in report["fresh"]


@pytest.mark.skipif(bool(__import__("importlib").util.find_spec("torch")), reason="PyTorch is installed")
def test_pytorch_bin_without_torch_explains_conversion(tmp_path):
    source = tmp_path / "hf"
    source.mkdir()
    (source / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ValueError, match=r"(?s)PyTorch is not installed.*weights_only=True.*save_file"):
        hf.read_hf_tensors(str(source))


def test_sharded_and_unreadable_safetensors(tmp_path):
    save_file({"output_bias": np.array(1.5, np.float32)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"output_weights": np.arange(3, dtype=np.float32)}, str(tmp_path / "model-00002-of-00002.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "output_bias": "model-00001-of-00002.safetensors", "output_weights": "model-00002-of-00002.safetensors"}}))
    tensors = hf.read_hf_tensors(str(tmp_path))
    assert sorted(tensors) == ["output_bias", "output_weights"]
    np.testing.assert_array_equal(tensors["output_weights"], [0.0, 1.0, 2.0])
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    with pytest.raises(ValueError, match="cannot be read with the safetensors NumPy API"):
        hf.read_hf_tensors(str(tmp_path))


def test_existing_model_dir_is_refused(tmp_path):
    config = TapasConfig(**TINY)
    source = _write_hf(tmp_path / "hf", hf.canonical_to_hf(ic.export_tf1_arrays(_random_model(config))),
                       _hf_config(config))
    ic.import_checkpoint("hf", source, str(tmp_path / "out"))
    with pytest.raises(ValueError, match="already holds a model"):
        ic.import_checkpoint("hf", source, str(tmp_path / "out"))


# --- TF1 import --------------------------------------------------------------------------------


def _write_tf1(directory, model, config: TapasConfig, extra=None) -> str:
    arrays = ic.export_tf1_arrays(model)
    # What a TF1 training run leaves beside the weights: Adam slots and the step counter.
    slots = {f"{name}/adam_{m}": np.zeros_like(value) for name, value in arrays.items() for m in "mv"}
    prefix = tf1.write_tf1_checkpoint({**arrays, **slots, "global_step": np.int64(7) * np.ones((), np.int64),
                                       **(extra or {})}, os.path.join(directory, "model.ckpt"))
    with open(os.path.join(directory, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(tf1.bert_config_from_tapas(config), f)
    return prefix


def test_tf1_import_with_task_preset_is_exact(tmp_path):
    config = TapasConfig(**TINY, hidden_act="gelu_tanh", num_aggregation_labels=4, use_answer_as_supervision=True,
                         temperature=0.0352513, answer_loss_cutoff=0.664694, huber_loss_delta=0.121194,
                         cell_selection_preference=0.207951, init_cell_selection_weights_to_zero=True,
                         reset_position_index_per_cell=True)
    model = _random_model(config)
    prefix = _write_tf1(tmp_path / "release", model, config)
    names_in_checkpoint = {name for name, _ in tf.train.list_variables(prefix)}
    assert "bert/encoder/layer_1/attention/self/query/kernel" in names_in_checkpoint
    assert "bert/embeddings/token_type_embeddings_6" in names_in_checkpoint

    report = ic.import_checkpoint("tf1", str(tmp_path / "release"), str(tmp_path / "out"), task="wtq",
                                  model_options={"reset_position_index_per_cell": True})

    assert report["hidden_act"] == "gelu_tanh" and report["mapped"] == 51
    assert report["notes"] == ["skipped 103 optimizer slots and counters (e.g. bert/embeddings/LayerNorm/beta/adam_m)"]
    loaded = tapas_tf.load_model(str(tmp_path / "out"))
    assert loaded.tapas_config == config
    _assert_same_weights(model, loaded)


def test_tf1_import_needs_the_position_reset_option(tmp_path):
    config = TapasConfig(**TINY)
    _write_tf1(tmp_path / "release", _random_model(config), config)
    with pytest.raises(ValueError, match="reset_position_index_per_cell"):
        ic.import_checkpoint("tf1", str(tmp_path / "release"), str(tmp_path / "out"), task="SQA")


def test_tf1_unknown_variable_is_refused(tmp_path):
    config = TapasConfig(**TINY)
    extra = {"bert/encoder/layer_0/attention/self/relative_bias": np.zeros(3, np.float32)}
    _write_tf1(tmp_path / "release", _random_model(config), config, extra)
    with pytest.raises(ValueError, match="nothing uses: bert/encoder/layer_0/attention/self/relative_bias.$"):
        ic.import_checkpoint("tf1", str(tmp_path / "release"), str(tmp_path / "out"),
                             model_options={"reset_position_index_per_cell": False})


def test_tf1_pretraining_checkpoint_builds_masked_lm_with_next_sentence_head(tmp_path):
    config = TapasConfig(**TINY, hidden_act="gelu_tanh", reset_position_index_per_cell=False)
    model = _random_model(config, "mlm", nsp=True)
    _write_tf1(tmp_path / "release", model, config)
    report = ic.import_checkpoint("tf1", str(tmp_path / "release"), str(tmp_path / "out"),
                                  model_options={"reset_position_index_per_cell": False})
    assert report["model_class"] == "TapasForMaskedLM" and report["use_next_sentence_prediction"]
    assert report["mapped"] == 11 + 32 + 2 + 5 + 2  # embeddings, layers, pooler, MLM head, NSP head


def test_tf1_release_zip_and_object_checkpoint(tmp_path):
    import zipfile  # pylint: disable=import-outside-toplevel

    config = TapasConfig(**TINY, hidden_act="gelu_tanh", reset_position_index_per_cell=True)
    model = _random_model(config)
    release = tmp_path / "tapas_tiny_reset"
    _write_tf1(release, model, config)
    with zipfile.ZipFile(tmp_path / "release.zip", "w") as archive:
        for name in os.listdir(release):
            archive.write(release / name, f"tapas_tiny_reset/{name}")
    ic.import_checkpoint("tf1", str(tmp_path / "release.zip"), str(tmp_path / "out"), task="SQA",
                         model_options={"reset_position_index_per_cell": True})
    _assert_same_weights(model, tapas_tf.load_model(str(tmp_path / "out")))

    with pytest.raises(ValueError, match="object-based TF2 checkpoint"):
        tf1.read_tf1_checkpoint(tapas_tf.checkpoints.model_dir.latest_checkpoint(str(tmp_path / "out")))


@pytest.mark.parametrize("name, expected", [
    ("bert/encoder/layer_0/output/dense/kernel/adam_m", True), ("output_weights/adam_v", True),
    ("bert/pooler/dense/bias/accum", True), ("counter", True), ("global_step", True),
    ("bert/encoder/layer_0/output/dense/kernel", False), ("output_weights_agg", False),
])
def test_training_state_is_recognised(name, expected):
    assert tf1.is_training_state(name) is expected


def test_tf1_bert_config_errors():
    with pytest.raises(ValueError, match="type_vocab_size=2"):
        tf1.tapas_config_from_bert_config({"type_vocab_size": 2}, {})
    with pytest.raises(ValueError, match="softmax_temperature=0.5"):
        tf1.tapas_config_from_bert_config({"type_vocab_size": [3] * 7, "softmax_temperature": 0.5}, {})
    config, notes = tf1.tapas_config_from_bert_config(
        {"type_vocab_size": [3, 4, 5, 2, 4, 4, 3], "hidden_act": "gelu", "directionality": "bidi"}, {"temperature": 2.0}
    )
    assert (config.hidden_act, config.temperature, config.type_vocab_sizes) == ("gelu_tanh", 2.0, (3, 4, 5, 2, 4, 4, 3))
    assert notes == ["ignored bert_config key directionality='bidi'"]


# --- options and CLI ---------------------------------------------------------------------------


def test_task_options_come_from_the_presets():
    assert ic.task_options("WIKISQL") == {
        "temperature": 0.107515, "answer_loss_cutoff": 0.185567, "huber_loss_delta": 1265.74,
        "cell_selection_preference": 0.611754, "select_one_column": False,
        "init_cell_selection_weights_to_zero": False, "num_aggregation_labels": 4, "use_answer_as_supervision": True,
        "num_classification_labels": 0, "disable_per_token_loss": False,
    }
    with pytest.raises(ValueError, match="Unknown --task 'TABFACT'"):
        ic.task_options("TABFACT")


def test_model_options_parsing():
    assert ic.parse_model_options('{"temperature": 0.5}') == {"temperature": 0.5}
    with pytest.raises(ValueError, match="unknown TapasConfig fields: tempreature"):
        ic.parse_model_options('{"tempreature": 0.5}')
    with pytest.raises(ValueError, match="not valid JSON"):
        ic.parse_model_options("{temperature: 0.5}")


def test_cli_writes_a_model_dir_and_reports_errors(tmp_path):
    config = TapasConfig(**TINY)
    source = _write_hf(tmp_path / "hf", hf.canonical_to_hf(ic.export_tf1_arrays(_random_model(config))),
                       _hf_config(config))
    out = str(tmp_path / "out")
    result = run_command("import", "--format=hf", f"--source={source}", f"--model_dir={out}",
                         '--model_options={"temperature": 0.5}')
    assert result.returncode == 0, result.stderr
    assert "TapasForQuestionAnswering, 49 weights mapped, 0 fresh, 0 dropped" in result.stdout
    assert tapas_tf.checkpoints.model_dir.load_config(out).temperature == 0.5
    result = run_command("import", "--format=hf", f"--source={source}", f"--model_dir={out}", "--task=SQA")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("tapas-tf import: error: --task applies to --format=tf1 only")
    result = run_command("import", "--format=hf", f"--source={source}", f"--model_dri={out}")
    assert result.returncode == 2
    assert "unknown flag --model_dri" in result.stderr and "did you mean --model_dir?" in result.stderr


# --- ablations: a released checkpoint into a model with an embedding switched off ------------


def test_hf_import_drops_tables_of_switched_off_embeddings(tmp_path):
    config = TapasConfig(**TINY)
    model = _random_model(config)
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(model), "tapas.")
    source = _write_hf(tmp_path / "hf", tensors, _hf_config(config))

    report = ic.import_checkpoint("hf", source, str(tmp_path / "out"),
                                  model_options={"use_rank_embeddings": False})

    ranks = ["bert/embeddings/token_type_embeddings_4", "bert/embeddings/token_type_embeddings_5"]
    assert report["dropped"] == ranks and report["fresh"] == [] and report["mapped"] == 49 - 2
    assert [f"dropped {name}: use_rank_embeddings=false" for name in ranks] == report["notes"][-2:]
    loaded = tapas_tf.load_model(str(tmp_path / "out"))
    assert loaded.tapas_config == config.replace(use_rank_embeddings=False)
    expected = model.weight_map()
    for name, variable in loaded.weight_map().items():
        np.testing.assert_array_equal(variable.numpy(), expected[name].numpy(), err_msg=name)
    assert set(expected) - set(loaded.weight_map()) == set(ranks)


def test_tf1_import_into_a_model_without_positions_stays_strict(tmp_path):
    config = TapasConfig(**TINY)
    model = _random_model(config)
    _write_tf1(tmp_path / "release", model, config, extra={"stray/tensor": np.zeros((2,), np.float32)})
    options = {"reset_position_index_per_cell": True, "use_position_embeddings": False}
    # Only the switched-off table is dropped; any other unused tensor still stops the import.
    with pytest.raises(ValueError, match="nothing uses: stray/tensor.$"):
        ic.import_checkpoint("tf1", str(tmp_path / "release"), str(tmp_path / "refused"),
                             model_options=options)

    _write_tf1(tmp_path / "clean", model, config)
    report = ic.import_checkpoint("tf1", str(tmp_path / "clean"), str(tmp_path / "out"),
                                  model_options=options)

    assert report["dropped"] == ["bert/embeddings/position_embeddings"]
    assert "dropped bert/embeddings/position_embeddings: use_position_embeddings=false" in report["notes"]
    assert tapas_tf.load_model(str(tmp_path / "out")).tapas_config.use_position_embeddings is False
