"""Tests of tapas_tf.checkpoints.bert_init on a tiny BERT the test writes, and a smoke test on MiniLM.

The tiny BERT is a BertForPreTraining state dict (HF names, `bert.` prefix, masked-LM and
next-sentence heads, the position_ids buffer) of random values: hidden H=8, 2 layers, 2 heads
of D=4, intermediate 12, vocab 20, 16 positions.
"""

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

from tapas_tf.checkpoints import bert_init as ifb, importer as ic, model_dir  # noqa: E402
from tapas_tf.models.qa_model import dummy_features  # noqa: E402
from tests.command_runner import run_command  # noqa: E402

H, LAYERS, HEADS, INTERMEDIATE, VOCAB, POSITIONS = 8, 2, 2, 12, 20, 16
BERT_CONFIG = {
    "model_type": "bert", "architectures": ["BertForPreTraining"], "hidden_size": H, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE, "vocab_size": VOCAB,
    "max_position_embeddings": POSITIONS, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "type_vocab_size": 2,
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
    "position_embedding_type": "absolute",
}


def _bert_tensors(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def rand(*shape):
        return rng.normal(size=shape).astype(np.float32)

    tensors = {
        "bert.embeddings.word_embeddings.weight": rand(VOCAB, H),
        "bert.embeddings.position_embeddings.weight": rand(POSITIONS, H),
        "bert.embeddings.token_type_embeddings.weight": rand(2, H),
        "bert.embeddings.LayerNorm.weight": rand(H),
        "bert.embeddings.LayerNorm.bias": rand(H),
        "bert.embeddings.position_ids": np.arange(POSITIONS, dtype=np.int64)[None],
        "bert.pooler.dense.weight": rand(H, H),
        "bert.pooler.dense.bias": rand(H),
        "cls.predictions.bias": rand(VOCAB),
        "cls.predictions.transform.dense.weight": rand(H, H),
        "cls.predictions.transform.dense.bias": rand(H),
        "cls.predictions.transform.LayerNorm.weight": rand(H),
        "cls.predictions.transform.LayerNorm.bias": rand(H),
        "cls.seq_relationship.weight": rand(2, H),
        "cls.seq_relationship.bias": rand(2),
    }
    for i in range(LAYERS):
        layer = f"bert.encoder.layer.{i}."
        for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            tensors[f"{layer}{part}.weight"] = rand(H, H)  # nn.Linear: [out, in]
            tensors[f"{layer}{part}.bias"] = rand(H)
        tensors[f"{layer}intermediate.dense.weight"] = rand(INTERMEDIATE, H)
        tensors[f"{layer}intermediate.dense.bias"] = rand(INTERMEDIATE)
        tensors[f"{layer}output.dense.weight"] = rand(H, INTERMEDIATE)
        tensors[f"{layer}output.dense.bias"] = rand(H)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{layer}{norm}.weight"] = rand(H)
            tensors[f"{layer}{norm}.bias"] = rand(H)
    return tensors


@pytest.fixture(name="bert_dir")
def fixture_bert_dir(tmp_path):
    directory = tmp_path / "bert"
    directory.mkdir()
    save_file(_bert_tensors(), str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(BERT_CONFIG), encoding="utf-8")
    return str(directory)


def test_config_comes_from_the_bert(bert_dir):
    config = ifb.tapas_config_from_bert(bert_dir, num_aggregation_labels=4, temperature=0.5)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size) == (
        H, LAYERS, HEADS, INTERMEDIATE)
    assert (config.vocab_size, config.max_position_embeddings, config.hidden_act) == (VOCAB, POSITIONS, "gelu")
    assert config.type_vocab_sizes == (3, 256, 256, 2, 256, 256, 10)
    assert (config.num_aggregation_labels, config.temperature) == (4, 0.5)


def test_qa_model_gets_the_bert_encoder_exactly(bert_dir):
    bert = _bert_tensors()
    model = ic.build_model(ifb.tapas_config_from_bert(bert_dir), "qa")
    weights = model.weight_map()
    before = {name: variable.numpy().copy() for name, variable in weights.items()}

    report = ifb.init_from_bert(model, bert_dir)

    value = {name: variable.numpy() for name, variable in weights.items()}
    np.testing.assert_array_equal(value["bert/embeddings/word_embeddings"],
                                  bert["bert.embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(value["bert/embeddings/LayerNorm/beta"], bert["bert.embeddings.LayerNorm.bias"])
    # Attention: ours [H, N, D] = the transposed Linear weight [in, out] split into N heads of D.
    query = bert["bert.encoder.layer.1.attention.self.query.weight"]
    np.testing.assert_array_equal(value["bert/encoder/layer_1/attention/self/query/kernel"],
                                  query.T.reshape(H, HEADS, H // HEADS))
    np.testing.assert_array_equal(value["bert/encoder/layer_1/attention/self/query/bias"],
                                  bert["bert.encoder.layer.1.attention.self.query.bias"].reshape(HEADS, H // HEADS))
    output = bert["bert.encoder.layer.0.attention.output.dense.weight"]
    np.testing.assert_array_equal(value["bert/encoder/layer_0/attention/output/dense/kernel"],
                                  output.T.reshape(HEADS, H // HEADS, H))
    np.testing.assert_array_equal(value["bert/encoder/layer_0/intermediate/dense/kernel"],
                                  bert["bert.encoder.layer.0.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(value["bert/encoder/layer_1/output/LayerNorm/gamma"],
                                  bert["bert.encoder.layer.1.output.LayerNorm.weight"])
    np.testing.assert_array_equal(value["bert/pooler/dense/kernel"], bert["bert.pooler.dense.weight"].T)
    # Segment table: BERT's two token types in rows 0 and 1; row 2 (and all else new) untouched.
    segments = value["bert/embeddings/token_type_embeddings_0"]
    np.testing.assert_array_equal(segments[:2], bert["bert.embeddings.token_type_embeddings.weight"])
    np.testing.assert_array_equal(segments[2], before["bert/embeddings/token_type_embeddings_0"][2])
    for name in report.fresh:
        np.testing.assert_array_equal(value[name], before[name], err_msg=name)

    assert len(report.mapped) == 4 + 16 * LAYERS + 2
    assert report.partial == {
        "bert/embeddings/token_type_embeddings_0": "rows 0..1 of 3 from BERT's token_type_embeddings"
    }
    assert report.fresh == [f"bert/embeddings/token_type_embeddings_{i}" for i in range(1, 7)] + [
        "column_output_bias", "column_output_weights", "output_bias", "output_weights"]
    assert report.ignored == [
        "cls.predictions.bias", "cls.predictions.transform.LayerNorm.bias",
        "cls.predictions.transform.LayerNorm.weight",
        "cls.predictions.transform.dense.bias", "cls.predictions.transform.dense.weight", "cls.seq_relationship.bias",
        "cls.seq_relationship.weight",
    ]


def test_masked_lm_model_gets_the_mlm_head(bert_dir):
    bert = _bert_tensors()
    model = ic.build_model(ifb.tapas_config_from_bert(bert_dir), "mlm")
    report = ifb.init_from_bert(model, bert_dir)
    weights = model.weight_map()
    np.testing.assert_array_equal(weights["cls/predictions/output_bias"].numpy(), bert["cls.predictions.bias"])
    np.testing.assert_array_equal(weights["cls/predictions/transform/dense/kernel"].numpy(),
                                  bert["cls.predictions.transform.dense.weight"].T)
    assert report.ignored == ["bert.pooler.dense.bias", "bert.pooler.dense.weight", "cls.seq_relationship.bias",
                              "cls.seq_relationship.weight"]


def test_mismatched_config_is_refused(bert_dir):
    config = ifb.tapas_config_from_bert(bert_dir, hidden_act="gelu_tanh", max_position_embeddings=32)
    with pytest.raises(ValueError, match=r"hidden_act='gelu_tanh' \(BERT: 'gelu'\), max_position_embeddings=32"):
        ifb.init_from_bert(ic.build_model(config, "qa"), bert_dir)


def test_unknown_and_missing_tensors_are_refused(tmp_path):
    tensors = _bert_tensors()
    tensors["bert.encoder.layer.0.attention.self.distance_embedding.weight"] = np.zeros((3, H), np.float32)
    del tensors["bert.encoder.layer.1.output.dense.bias"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(BERT_CONFIG), encoding="utf-8")
    model = ic.build_model(ifb.tapas_config_from_bert(str(tmp_path)), "qa")
    with pytest.raises(ValueError, match="not BERT parameters: bert.encoder.layer.0.attention.self.distance_embedding"):
        ifb.init_from_bert(model, str(tmp_path))
    del tensors["bert.encoder.layer.0.attention.self.distance_embedding.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="lacks encoder weights: bert/encoder/layer_1/output/dense/bias.$"):
        ifb.init_from_bert(model, str(tmp_path))


def test_cli_writes_a_model_directory(bert_dir, tmp_path):
    out = str(tmp_path / "out")
    result = run_command("init-from-bert", f"--bert_dir={bert_dir}", f"--model_dir={out}", "--task=WTQ")
    assert result.returncode == 0, result.stderr
    assert "38 weights from" in result.stdout  # 4 embedding + 32 layer + 2 pooler; 12 fresh
    config = model_dir.load_config(out)
    assert (config.hidden_size, config.temperature, config.num_aggregation_labels) == (H, 0.0352513, 4)
    model_dir.load_model(out)


def test_minilm_package_initialises_a_model():
    pytest.importorskip(ifb.MINILM_PACKAGE)
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel

    bert_dir = ifb.minilm_dir()
    config = ifb.tapas_config_from_bert(bert_dir)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    model = ic.build_model(config, "qa")
    report = ifb.init_from_bert(model, bert_dir)
    assert len(report.mapped) == 4 + 16 * 6 + 2 and report.ignored == []
    minilm = load_file(os.path.join(bert_dir, "model.safetensors"))
    np.testing.assert_array_equal(model.weight_map()["bert/encoder/layer_5/output/dense/kernel"].numpy(),
                                  minilm["encoder.layer.5.output.dense.weight"].T)
    outputs = model(dummy_features(1, 8), training=False)
    assert np.all(np.isfinite(outputs["token_logits"].numpy()))
