"""Importing Google's released table retrievers (`tapas_tf.checkpoints.retriever`).

The fixture is a tiny TF1 dual encoder written here in Google's layout from its variable names alone
(never from our `weight_map()`): the table tower under `bert/`, the question tower under `bert_1/`,
`table_projection` and `text_projection` <float32>[dim, hidden], with the Adam slots and `global_step`
a TF1 training run leaves, beside `bert_config.json` and `vocab.txt`; and a zip of it as the release
zips are laid out. It is imported by path, by zip, by prefix and by name (through the local release
server of test_released), and the embeddings are checked against a NumPy re-computation of the
original graph (tapas/models/bert/modeling.py and table_retriever_model.py), written below from
that code: word + position + the seven token-type tables, LayerNorm (eps 1e-12), attention with the
additive mask -10000, GELU in modeling.gelu's tanh form, post-LN blocks, the pooler
tanh(h_cls W + b), then h @ P^T.
"""

import hashlib
import io
import json
import math
import os
import zipfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import released, retriever, tf1  # noqa: E402
from tapas_tf.models import dual_encoder  # noqa: E402
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES  # noqa: E402
from tests.checkpoints.release_server import ReleaseServer, use_local_hub  # noqa: E402
from tests.command_runner import run_command  # noqa: E402
from tests.vocab_fixture import vocab_tokens, write_test_vocab  # noqa: E402

NAME = "tapas_nq_hn_retriever_tiny"
ZIP_PATH = f"/tapas_models/2021_04_27/{NAME}.zip"
HIDDEN, LAYERS, HEADS, INTERMEDIATE, DIM = 32, 2, 2, 64, 8
HEAD_SIZE = HIDDEN // HEADS
VOCAB = len(vocab_tokens())
MAX_POSITIONS = 512
TYPE_VOCAB_SIZES = [3, 256, 256, 2, 256, 256, 10]
BERT_CONFIG = {
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
    "intermediate_size": INTERMEDIATE, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": MAX_POSITIONS,
    "type_vocab_size": TYPE_VOCAB_SIZES, "initializer_range": 0.02,
}
# 2 towers x (11 embedding variables + 16 per layer + 2 pooler) + 2 projections.
NUM_WEIGHTS = 2 * (11 + 16 * LAYERS + 2) + 2
TOLERANCE = 1e-5


# --- the fixture: Google's layout ----------------------------------------------------------------


def _tower_shapes(prefix: str) -> dict:
    """TF1 name -> shape of one `modeling.BertModel` under `prefix` (bert, bert_1)."""
    shapes = {f"{prefix}/embeddings/word_embeddings": (VOCAB, HIDDEN),
              f"{prefix}/embeddings/position_embeddings": (MAX_POSITIONS, HIDDEN),
              f"{prefix}/embeddings/LayerNorm/gamma": (HIDDEN,), f"{prefix}/embeddings/LayerNorm/beta": (HIDDEN,),
              f"{prefix}/pooler/dense/kernel": (HIDDEN, HIDDEN), f"{prefix}/pooler/dense/bias": (HIDDEN,)}
    for i, size in enumerate(TYPE_VOCAB_SIZES):
        shapes[f"{prefix}/embeddings/token_type_embeddings_{i}"] = (size, HIDDEN)
    for layer in range(LAYERS):
        scope = f"{prefix}/encoder/layer_{layer}"
        for part in ("attention/self/query", "attention/self/key", "attention/self/value", "attention/output/dense"):
            shapes[f"{scope}/{part}/kernel"], shapes[f"{scope}/{part}/bias"] = (HIDDEN, HIDDEN), (HIDDEN,)
        shapes[f"{scope}/intermediate/dense/kernel"] = (HIDDEN, INTERMEDIATE)
        shapes[f"{scope}/intermediate/dense/bias"] = (INTERMEDIATE,)
        shapes[f"{scope}/output/dense/kernel"], shapes[f"{scope}/output/dense/bias"] = (INTERMEDIATE, HIDDEN), (HIDDEN,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{scope}/{norm}/gamma"], shapes[f"{scope}/{norm}/beta"] = (HIDDEN,), (HIDDEN,)
    return shapes


def _google_arrays(seed: int = 0, projection_dim: int = DIM) -> dict:
    """Random weights of a retriever in Google's layout, scaled so that no tanh or softmax saturates."""
    rng = np.random.default_rng(seed)
    shapes = {**_tower_shapes("bert"), **_tower_shapes("bert_1")}
    if projection_dim:
        shapes.update(table_projection=(projection_dim, HIDDEN), text_projection=(projection_dim, HIDDEN))
    arrays = {}
    for name, shape in sorted(shapes.items()):
        noise = rng.normal(size=shape)
        if name.endswith("gamma"):
            value = 1.0 + 0.1 * noise
        elif name.endswith(("beta", "bias")):
            value = 0.1 * noise
        elif "embeddings" in name:
            value = 0.5 * noise
        else:  # Kernels and projections.
            value = 0.2 * noise
        arrays[name] = value.astype(np.float32)
    return arrays


def _write_release(directory, arrays: dict, bert_config: dict = BERT_CONFIG, training_state: bool = True) -> str:
    """bert_config.json, vocab.txt and model.ckpt.* in `directory` (as Google's zips unpack)."""
    os.makedirs(directory, exist_ok=True)
    state = {}
    if training_state:  # What a TF1 run leaves: Adam slots and the step.
        state = {f"{name}/adam_{m}": np.zeros_like(value) for name, value in list(arrays.items())[:5] for m in "mv"}
        state["global_step"] = np.array(5000, np.int64)
    tf1.write_tf1_checkpoint({**arrays, **state}, os.path.join(directory, "model.ckpt"))
    with open(os.path.join(directory, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(bert_config, f)
    write_test_vocab(os.path.join(directory, "vocab.txt"))
    return str(directory)


def _zip_bytes(directory) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(os.listdir(directory)):
            archive.write(os.path.join(directory, name), f"{NAME}/{name}")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The arrays, the release directory and its zip (path and bytes)."""
    root = tmp_path_factory.mktemp("retriever_release")
    arrays = _google_arrays()
    directory = _write_release(root / NAME, arrays)
    data = _zip_bytes(directory)
    (root / f"{NAME}.zip").write_bytes(data)
    return {"arrays": arrays, "dir": directory, "zip": str(root / f"{NAME}.zip"), "zip_bytes": data}


@pytest.fixture(scope="module")
def imported(release, tmp_path_factory):
    """The fixture imported by path, and the report."""
    out = str(tmp_path_factory.mktemp("imported") / "retriever")
    report = retriever.import_retriever(release["dir"], out)
    return {"dir": out, "report": report}


def _features(batch: int = 3, table_length: int = 12, query_length: int = 7) -> dict:
    """Tables with title, header and cells (every token type set) and questions, with padding."""
    rng = np.random.default_rng(1)
    features = {"input_ids": rng.integers(1, VOCAB, (batch, table_length)),
                "input_mask": np.ones((batch, table_length), np.int64)}
    features["input_mask"][-1, -3:] = 0
    title = 4
    cells = table_length - title
    features["segment_ids"] = np.array([[0] * title + [1] * cells] * batch)
    features["column_ids"] = np.array([[0] * title + [1 + i % 3 for i in range(cells)]] * batch)
    features["row_ids"] = np.array([[0] * title + [i // 3 for i in range(cells)]] * batch)
    features["prev_label_ids"] = rng.integers(0, 2, (batch, table_length))
    features["column_ranks"] = rng.integers(0, 256, (batch, table_length))
    features["inv_column_ranks"] = rng.integers(0, 256, (batch, table_length))
    features["numeric_relations"] = rng.integers(0, 10, (batch, table_length))
    features[dual_encoder.QUESTION_IDS] = rng.integers(1, VOCAB, (batch, query_length))
    features[dual_encoder.QUESTION_MASK] = np.ones((batch, query_length), np.int64)
    features[dual_encoder.QUESTION_MASK][0, -2:] = 0
    return {name: value.astype(np.int32) for name, value in features.items()}


# --- the original graph in NumPy -------------------------------------------------------------------


def _layer_norm(x, gamma, beta):
    """tf_slim.layer_norm over the last axis, epsilon 1e-12."""
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta


def _gelu_tanh(x):
    """modeling.gelu: the tanh approximation (what "gelu" in bert_config.json means there)."""
    return x * 0.5 * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _gelu_erf(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _pooled(w: dict, prefix: str, input_ids, input_mask, token_types, gelu=_gelu_tanh):
    """modeling.BertModel(...).get_pooled_output() <float64>[batch, hidden], in eval mode (no dropout)."""
    w = {name[len(prefix) + 1:]: value.astype(np.float64) for name, value in w.items() if name.startswith(prefix + "/")}
    batch, length = input_ids.shape
    x = w["embeddings/word_embeddings"][input_ids]
    for i, ids in enumerate(token_types):  # embedding_postprocessor: one table per token type, summed.
        x = x + w[f"embeddings/token_type_embeddings_{i}"][ids]
    x = x + w["embeddings/position_embeddings"][:length][None]  # Absolute: no reset_position_index_per_cell.
    x = _layer_norm(x, w["embeddings/LayerNorm/gamma"], w["embeddings/LayerNorm/beta"])
    # attention_layer: log(mask), with -inf replaced by -10000, added to the scores.
    adder = np.where(input_mask[:, None, None, :] > 0, 0.0, -10000.0)
    for layer in range(LAYERS):
        scope = f"encoder/layer_{layer}"

        def dense(inputs, part):
            return inputs @ w[f"{scope}/{part}/kernel"] + w[f"{scope}/{part}/bias"]

        def heads(t):  # [B, S, N*D] -> [B, N, S, D]
            return t.reshape(batch, length, HEADS, HEAD_SIZE).transpose(0, 2, 1, 3)

        q, k, v = (heads(dense(x, f"attention/self/{part}")) for part in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_SIZE) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, HIDDEN)
        attention = _layer_norm(dense(context, "attention/output/dense") + x,
                                w[f"{scope}/attention/output/LayerNorm/gamma"],
                                w[f"{scope}/attention/output/LayerNorm/beta"])
        inner = gelu(dense(attention, "intermediate/dense"))
        x = _layer_norm(dense(inner, "output/dense") + attention, w[f"{scope}/output/LayerNorm/gamma"],
                        w[f"{scope}/output/LayerNorm/beta"])
    return np.tanh(x[:, 0] @ w["pooler/dense/kernel"] + w["pooler/dense/bias"])


def _google_embeddings(w: dict, features: dict, gelu=_gelu_tanh):
    """(query_rep, table_rep) of table_retriever_model.model_fn: each tower's pooled output @ P^T."""
    table = _pooled(w, "bert", features["input_ids"], features["input_mask"],
                    [features[name] for name in TOKEN_TYPE_FEATURES], gelu)
    zeros = np.zeros_like(features[dual_encoder.QUESTION_IDS])
    query = _pooled(w, "bert_1", features[dual_encoder.QUESTION_IDS], features[dual_encoder.QUESTION_MASK],
                    [zeros] * len(TOKEN_TYPE_FEATURES), gelu)
    if "table_projection" in w:
        table, query = table @ w["table_projection"].T, query @ w["text_projection"].T
    return query, table


def _ours(model, features: dict):
    outputs = model({name: tf.constant(value) for name, value in features.items()}, training=False)
    return outputs["query_embeddings"].numpy(), outputs["table_embeddings"].numpy()


def _one_line(call, *texts, error=ValueError) -> str:
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message, message
    for text in texts:
        assert text in message, message
    return message


def _assert_same_weights(model_dir_a: str, model_dir_b: str) -> None:
    a, _ = retriever.load_dual_encoder(model_dir_a)
    b, _ = retriever.load_dual_encoder(model_dir_b)
    weights_b = b.weight_map()
    for name, variable in a.weight_map().items():
        np.testing.assert_array_equal(variable.numpy(), weights_b[name].numpy(), err_msg=name)


# --- import by path: the embeddings of the original graph ----------------------------------------


def test_projection_names_are_the_models():
    assert retriever.PROJECTIONS == (dual_encoder.TABLE_PROJECTION, dual_encoder.TEXT_PROJECTION)


def test_import_by_path_gives_the_original_graphs_embeddings(release, imported):
    model, config = retriever.load_dual_encoder(imported["dir"])

    query, table = _ours(model, _features())
    expected_query, expected_table = _google_embeddings(release["arrays"], _features())

    assert query.shape == (3, DIM) and table.shape == (3, DIM)
    np.testing.assert_allclose(query, expected_query, atol=TOLERANCE, rtol=TOLERANCE)
    np.testing.assert_allclose(table, expected_table, atol=TOLERANCE, rtol=TOLERANCE)
    # The check tells the two GELUs apart: the erf form is not the original graph's.
    erf_query, _ = _google_embeddings(release["arrays"], _features(), gelu=_gelu_erf)
    assert np.abs(erf_query - expected_query).max() > 10 * TOLERANCE


def test_import_by_path_writes_the_config_and_the_report(imported):
    _, config = retriever.load_dual_encoder(imported["dir"])
    assert (config.projection_dim, config.pooling, config.normalize, config.share_encoders) == (DIM, "pooled", False,
                                                                                                 False)
    assert (config.max_query_length, config.max_table_length) == (128, 512)
    encoder = config.encoder
    assert (encoder.hidden_size, encoder.num_hidden_layers, encoder.intermediate_size) == (HIDDEN, LAYERS, INTERMEDIATE)
    assert encoder.hidden_act == "gelu_tanh" and encoder.layer_norm_eps == 1e-12
    assert encoder.type_vocab_sizes == tuple(TYPE_VOCAB_SIZES) and not encoder.reset_position_index_per_cell

    report = imported["report"]
    assert report["model_class"] == "TableDualEncoder" and report["mapped"] == NUM_WEIGHTS
    assert report["fresh"] == [] and report["dropped"] == [] and report["kind"] == "dual_encoder"
    assert report["notes"] == ["skipped 11 optimizer slots and counters (e.g. bert/embeddings/LayerNorm/beta/adam_m)"]
    files = set(os.listdir(imported["dir"]))
    assert {"dual_encoder.json", "embedder.json", "vocab.txt", "import_report.json", "checkpoints"} <= files
    assert "tapas_config.json" not in files  # Not a QA model directory.
    with open(os.path.join(imported["dir"], "embedder.json"), encoding="utf-8") as f:
        embedder = json.load(f)
    assert embedder["kind"] == "dual_encoder" and embedder["dimension"] == DIM and embedder["similarity"] == "dot"
    assert embedder["config_file"] == "dual_encoder.json" and embedder["checkpoint"] == "checkpoints/ckpt-0"
    assert embedder["model_id"].startswith("dual_encoder-") and len(embedder["model_id"]) == len("dual_encoder-") + 16
    with open(os.path.join(imported["dir"], "import_report.json"), encoding="utf-8") as f:
        assert json.load(f)["checkpoint"] == "checkpoints/ckpt-0"


def test_import_by_zip_and_by_prefix_give_the_same_weights(release, imported, tmp_path):
    report = retriever.import_retriever(release["zip"], str(tmp_path / "from_zip"))
    assert report["source"] == release["zip"] and report["mapped"] == NUM_WEIGHTS
    _assert_same_weights(imported["dir"], str(tmp_path / "from_zip"))
    retriever.import_retriever(os.path.join(release["dir"], "model.ckpt"), str(tmp_path / "from_prefix"))
    _assert_same_weights(imported["dir"], str(tmp_path / "from_prefix"))


def test_without_projections_and_with_options(tmp_path):
    arrays = _google_arrays(seed=4, projection_dim=0)
    source = _write_release(tmp_path / "tapas_dual_encoder_proj_0_tiny", arrays, training_state=False)
    options = {"reset_position_index_per_cell": True, "max_query_length": 64, "max_table_length": 256}

    report = retriever.import_retriever(source, str(tmp_path / "out"), model_options=options)

    model, config = retriever.load_dual_encoder(str(tmp_path / "out"))
    assert report["mapped"] == NUM_WEIGHTS - 2 and report["notes"] == [] and report["projection_dim"] == 0
    assert (config.projection_dim, config.embedding_dim, config.max_query_length, config.max_table_length) == (
        0, HIDDEN, 64, 256)
    assert config.encoder.reset_position_index_per_cell
    query, _ = _ours(model, _features())
    expected_query, _ = _google_embeddings(arrays, _features())  # The pooled outputs themselves.
    np.testing.assert_allclose(query, expected_query, atol=TOLERANCE, rtol=TOLERANCE)
    _one_line(lambda: retriever.import_retriever(source, str(tmp_path / "bad"), model_options={"pooling": "mean"}),
              "unknown fields: pooling")


# --- detection, names and the release server -------------------------------------------------------


def test_retrievers_are_told_from_other_sources(release, tmp_path):
    assert retriever.is_retriever_source(release["dir"]) and retriever.is_retriever_source(release["zip"])
    assert retriever.is_retriever_source(os.path.join(release["dir"], "model.ckpt"))
    assert retriever.is_retriever_source(NAME)
    assert retriever.is_retriever_source(f"https://host/x/{NAME}.zip")
    qa = {name: value for name, value in release["arrays"].items() if name.startswith("bert/")}
    assert not retriever.is_retriever_source(_write_release(tmp_path / "qa", qa))
    assert not retriever.is_retriever_source(str(tmp_path / "nothing"))
    _one_line(lambda: retriever.is_retriever_source("tapas_nq_hn_retreiver_tiny"), "did you mean " + NAME)


def test_every_released_name_has_an_address():
    assert len(released.RETRIEVER_RELEASES) == 13
    release = released.retriever_release("tapas_dual_encoder_proj_256_small")
    assert release.location == ("https://storage.googleapis.com/tapas_models/2021_04_27/"
                                "tapas_dual_encoder_proj_256_small.zip")
    assert released.retriever_release(f"{NAME}#sha256={'ab' * 32}").sha256 == "ab" * 32
    _one_line(lambda: released.retriever_release("tapas_nq_hn_retriever_base"), "is not a released retriever",
              error=released.ReleasedModelError)


@pytest.fixture
def server(release, tmp_path, monkeypatch):
    with ReleaseServer() as running:
        running.add_file(ZIP_PATH, release["zip_bytes"])
        use_local_hub(monkeypatch, running.url, tmp_path)
        monkeypatch.setenv(released.RELEASE_HOST_ENV, running.url)
        yield running


def test_import_by_name_downloads_the_release(server, release, imported, tmp_path, forbid_network):
    report = retriever.import_retriever(NAME, str(tmp_path / "by_name"))

    assert report["source"] == NAME and report["url"] == server.url + ZIP_PATH
    assert report["sha256"] == hashlib.sha256(release["zip_bytes"]).hexdigest()
    _assert_same_weights(imported["dir"], str(tmp_path / "by_name"))
    assert not os.listdir(os.path.join(released.models_cache_dir(), "downloads"))  # The zip is not kept.

    cached = retriever.released_retriever_dir(NAME)
    assert released.read_manifest(cached)["model_kind"] == "dual_encoder"
    _assert_same_weights(imported["dir"], cached)
    server.stop()
    attempts = forbid_network()
    assert retriever.released_retriever_dir(NAME) == cached  # The cache: no network.
    assert attempts == []
    # Asked for as a question-answering model, a retriever is refused in one line.
    _one_line(lambda: released.released_model_dir(server.url + ZIP_PATH), "is a table retriever",
              "tapas-tf import --format=tf1", error=released.ReleasedModelError)


def test_a_missing_release_is_one_line(server, tmp_path):
    _one_line(lambda: retriever.import_retriever("tapas_nq_retriever_small", str(tmp_path / "out")), "HTTP 404",
              "tapas_nq_retriever_small.zip", error=released.ReleasedModelError)


# --- errors -----------------------------------------------------------------------------------


def test_a_directory_without_a_checkpoint(tmp_path):
    source = tmp_path / "no_checkpoint"
    source.mkdir()
    (source / "bert_config.json").write_text(json.dumps(BERT_CONFIG))
    _one_line(lambda: retriever.import_retriever(str(source), str(tmp_path / "out")), str(source),
              "expected one checkpoint (*.index), found none")
    assert not os.path.exists(tmp_path / "out")


def test_a_qa_checkpoint_is_not_a_retriever(release, tmp_path):
    arrays = {name: value for name, value in release["arrays"].items() if name.startswith("bert/")}
    arrays.update(output_weights=np.zeros(HIDDEN, np.float32), output_bias=np.zeros((), np.float32))
    source = _write_release(tmp_path / "tapas_sqa_tiny", arrays)
    _one_line(lambda: retriever.import_retriever(source, str(tmp_path / "out")),
              os.path.join(source, "model.ckpt"), "is not a dual-encoder retriever", "no bert_1/")


@pytest.mark.parametrize("change, texts", [
    ({"bert_1/encoder/layer_1/intermediate/dense/kernel": (INTERMEDIATE, HIDDEN)},
     ["bert_1/encoder/layer_1/intermediate/dense/kernel (64, 32) != (32, 64)"]),
    ({"text_projection": (DIM, 16)}, ["the projections must both be [down_projection_dim, hidden_size=32]",
                                      "text_projection (8, 16)"]),
    ({"bert_1/pooler/dense/bias": None}, ["missing 1 tensors (bert_1/pooler/dense/bias)"]),
    ({"table_projection": None}, ["has text_projection but no table_projection"]),
    ({"bert_1/encoder/layer_2/output/dense/bias": (HIDDEN,)},
     ["unexpected 1 tensors (bert_1/encoder/layer_2/output/dense/bias)"]),
])
def test_tensors_that_do_not_fit_are_named(release, tmp_path, change, texts):
    arrays = dict(release["arrays"])
    for name, shape in change.items():
        if shape is None:
            del arrays[name]
        else:
            arrays[name] = np.zeros(shape, np.float32)
    source = _write_release(tmp_path / "bad", arrays)
    _one_line(lambda: retriever.import_retriever(source, str(tmp_path / "out")), os.path.join(source, "model.ckpt"),
              *texts)
    assert not os.path.exists(tmp_path / "out")


def test_loading_and_overwriting_are_refused_in_one_line(imported, release, tmp_path):
    _one_line(lambda: retriever.load_dual_encoder(str(tmp_path)), str(tmp_path),
              "is not a tapas-tf dual-encoder model directory: dual_encoder.json is missing")
    _one_line(lambda: retriever.import_retriever(release["dir"], imported["dir"]), "already holds a model")


# --- the command line ------------------------------------------------------------------------------


def test_the_import_command_finds_a_retriever_by_its_layout(release, tmp_path):
    out = str(tmp_path / "out")
    result = run_command("import", "--format=tf1", f"--source={release['zip']}", f"--model_dir={out}",
                         '--model_options={"max_query_length": 32}')
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Wrote {out}: TableDualEncoder, {NUM_WEIGHTS} weights mapped, 0 fresh, 0 dropped" in result.stdout
    assert retriever.load_dual_encoder(out)[1].max_query_length == 32
    result = run_command("import", "--format=tf1", f"--source={release['dir']}", f"--model_dir={tmp_path / 'x'}",
                         "--task=SQA")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "tapas-tf import: error: --task does not apply to a retriever (a dual encoder has no task heads).")
