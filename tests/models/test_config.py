"""Tests of models/config.py: presets, JSON round trip, replace and validation errors."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tapas_tf.models.config import SIZES, TapasConfig

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_defaults_are_base_size_and_hf_defaults():
    config = TapasConfig()
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (12, 768, 12)
    assert config.intermediate_size == 3072
    assert config.type_vocab_sizes == (3, 256, 256, 2, 256, 256, 10)
    assert config.max_position_embeddings == 1024
    assert (config.max_num_rows, config.max_num_columns) == (64, 32)
    assert config.hidden_act == "gelu"
    assert config.positive_label_weight == 10.0
    assert config.huber_loss_delta is None and config.answer_loss_cutoff is None
    assert not config.is_weakly_supervised


@pytest.mark.parametrize(
    "name, layers, hidden",
    [("tiny", 2, 128), ("mini", 4, 256), ("small", 4, 512), ("medium", 8, 512), ("base", 12, 768), ("large", 24, 1024)],
)
def test_presets(name, layers, hidden):
    config = TapasConfig.from_preset(name)
    assert config.num_hidden_layers == layers
    assert config.hidden_size == hidden
    # heads = H / 64, intermediate = 4H: e.g. large has 1024 / 64 = 16 heads and 4096 units.
    assert config.num_attention_heads == hidden // 64
    assert config.intermediate_size == 4 * hidden
    assert SIZES[name]["hidden_size"] == hidden


def test_from_preset_applies_overrides():
    config = TapasConfig.from_preset("tiny", num_aggregation_labels=4, temperature=0.0352513)
    assert config.hidden_size == 128
    assert config.num_aggregation_labels == 4
    assert config.temperature == 0.0352513


def test_from_preset_unknown_name():
    with pytest.raises(ValueError, match="Unknown size preset 'huge'"):
        TapasConfig.from_preset("huge")


def _wtq_config() -> TapasConfig:
    # The WTQ hyper-parameters of the paper (tapas_tf/task_registry/presets.py).
    return TapasConfig.from_preset(
        "tiny",
        num_aggregation_labels=4,
        use_answer_as_supervision=True,
        temperature=0.0352513,
        answer_loss_cutoff=0.664694,
        huber_loss_delta=0.121194,
        cell_selection_preference=0.207951,
        init_cell_selection_weights_to_zero=True,
        average_approximation_function="second_order",
    )


def test_json_round_trip(tmp_path):
    config = _wtq_config()
    path = tmp_path / "config.json"
    config.to_json_file(path)
    loaded = TapasConfig.from_json_file(path)
    assert loaded == config
    assert isinstance(loaded.type_vocab_sizes, tuple)
    on_disk = json.loads(path.read_text())
    assert on_disk["type_vocab_sizes"] == [3, 256, 256, 2, 256, 256, 10]
    assert on_disk["huber_loss_delta"] == 0.121194
    assert set(on_disk) == {field.name for field in dataclasses.fields(TapasConfig)}


def test_from_json_file_rejects_unknown_keys(tmp_path):
    path = tmp_path / "config.json"
    values = TapasConfig().to_dict()
    values.update({"learning_rate": 1e-5, "use_tpu": True})
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError, match="Unknown TapasConfig keys: learning_rate, use_tpu"):
        TapasConfig.from_json_file(path)


def test_from_json_file_rejects_bad_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        TapasConfig.from_json_file(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        TapasConfig.from_json_file(path)


def test_config_is_frozen_and_hashable():
    config = TapasConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden_size = 64
    assert hash(config) == hash(TapasConfig(type_vocab_sizes=[3, 256, 256, 2, 256, 256, 10]))


def test_replace_validates_and_rejects_unknown_fields():
    config = TapasConfig.from_preset("tiny")
    assert config.replace(select_one_column=False).select_one_column is False
    assert config.select_one_column is True
    with pytest.raises(ValueError, match="not divisible"):
        config.replace(num_attention_heads=3)
    with pytest.raises(ValueError, match="Unknown TapasConfig keys: num_layers"):
        config.replace(num_layers=3)


def test_is_weakly_supervised():
    assert _wtq_config().is_weakly_supervised
    # Answer supervision without an aggregation head is the supervised setting (as in HF).
    assert not TapasConfig(use_answer_as_supervision=True).is_weakly_supervised
    assert not TapasConfig(num_aggregation_labels=4).is_weakly_supervised


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"hidden_size": 100, "num_attention_heads": 12},
            r"hidden_size \(100\) is not divisible by num_attention_heads \(12\)",
        ),
        ({"hidden_act": "swish"}, "Unknown hidden_act 'swish'"),
        ({"average_approximation_function": "third_order"}, "Unknown average_approximation_function"),
        ({"type_vocab_sizes": (3, 256, 256, 2, 256, 256)}, "type_vocab_sizes must be 7 positive ints"),
        ({"type_vocab_sizes": (3, 256, 256, 2, 256, 256, 0)}, "type_vocab_sizes must be 7 positive ints"),
        ({"type_vocab_sizes": "3256"}, "type_vocab_sizes must be a sequence of ints"),
        ({"hidden_dropout_prob": 1.0}, r"hidden_dropout_prob must be in \[0, 1\)"),
        ({"attention_probs_dropout_prob": -0.1}, r"attention_probs_dropout_prob must be in \[0, 1\)"),
        ({"temperature": 0.0}, "temperature must be positive"),
        ({"aggregation_temperature": -1.0}, "aggregation_temperature must be positive"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be an int >= 1"),
        ({"vocab_size": 10.5}, "vocab_size must be an int >= 1"),
        ({"max_num_rows": True}, "max_num_rows must be an int >= 1"),
        ({"num_aggregation_labels": -1}, "num_aggregation_labels must be an int >= 0"),
        ({"positive_label_weight": float("nan")}, "positive_label_weight must be a finite number"),
        ({"huber_loss_delta": 0.0}, "huber_loss_delta must be positive"),
        ({"answer_loss_cutoff": "big"}, "answer_loss_cutoff must be a finite number"),
    ],
)
def test_validation_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        TapasConfig(**changes)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_aggregation_labels": 3}, "needs num_aggregation_labels=4"),
        ({"cell_selection_preference": None}, "needs cell_selection_preference"),
        ({"huber_loss_delta": None}, "needs huber_loss_delta"),
    ],
)
def test_weak_supervision_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        _wtq_config().replace(**changes)


def test_normalized_answer_loss_needs_no_huber_delta():
    config = _wtq_config().replace(huber_loss_delta=None, use_normalized_answer_loss=True)
    assert config.huber_loss_delta is None


def test_package_sets_legacy_keras_and_exports_main_classes():
    # A fresh interpreter: importing the package must select Keras 2 before TensorFlow loads.
    code = (
        "import os, models; "
        "assert os.environ['TF_USE_LEGACY_KERAS'] == '1'; "
        "import tensorflow as tf; "
        "assert tf.keras.__name__.startswith('tf_keras'), tf.keras.__name__; "
        "print(sorted(n for n in models.__all__ if n.startswith('Tapas')))"
    )
    env = {key: value for key, value in os.environ.items() if key != "TF_USE_LEGACY_KERAS"}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == str(
        ["TapasConfig", "TapasEmbeddings", "TapasEncoder", "TapasForMaskedLM", "TapasForQuestionAnswering"]
    )
