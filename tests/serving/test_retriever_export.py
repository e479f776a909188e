"""Export of a retrieval dual encoder (tapas_tf/serving/retriever_export.py), its client
(retriever_client.py) and `tapas-tf export-retriever`.

A tiny seeded dual encoder (hidden 32, 2 layers, 2 heads, intermediate 64, two towers, pooled and
projected to 16) over the test vocabulary is written as a dual-encoder directory and exported once
per module, with its LiteRT query tower. The SavedModel's signatures are compared with the Keras
model's `embed_queries` / `embed_tables` at two sequence lengths each, the LiteRT copy with
TensorFlow, and the clients with `DenseRetriever` on the same question strings.
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib, retriever  # noqa: E402
from tapas_tf.data.readers.common import make_table  # noqa: E402
from tapas_tf.features.retrieval_features import TABLE_INPUT_FEATURES, stack_tables  # noqa: E402
from tapas_tf.models.dual_encoder import DualEncoderConfig, TableDualEncoder, dummy_retrieval_features  # noqa: E402
from tapas_tf.retrieval.dense import DenseRetriever  # noqa: E402
from tapas_tf.serving import lite_export, retriever_client, retriever_export  # noqa: E402
from tapas_tf.serving.retriever_client import RetrieverServingClient  # noqa: E402
from tests.command_runner import run_command  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402
from tests.test_command import assert_one_line_error  # noqa: E402
from tests.vocab_fixture import vocab_tokens, write_test_vocab  # noqa: E402

ATOL = 1e-5
DIMENSION = 16
EXTRA_WORDS = ["torre", "jaume", "pylon", "danube", "rhine"]
QUESTIONS = ["how tall is torre jaume", "which pylon is highest?", "how long is the danube",
             "what is the length of the rhine in km and how many countries does it flow through on its "
             "way from the alps to the north sea"]  # Longer than max_query_length: cut.
TABLES = [
    ("Aerial lift pylons", ["name", "height"], [["torre jaume", "107"], ["gant", "94"]]),
    ("Rivers of europe", ["river", "length", "country"],
     [["danube", "2850", "germany"], ["rhine", "1230", "germany"], ["elbe", "1094", "germany"],
      ["loire", "1006", "france"]]),
]
SIGNATURES = {"serving_default", "query_embedding", "table_embedding"}
# Runs in a fresh interpreter: loads the export and runs both signatures; tapas_tf is never imported.
FRESH_PROCESS = textwrap.dedent("""
    import pickle, sys
    import tensorflow as tf
    path, query, tables = pickle.load(open(sys.argv[1], "rb"))
    loaded = tf.saved_model.load(path)
    out = {name: loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})["embeddings"].numpy()
           for name, inputs in (("query_embedding", query), ("table_embedding", tables))}
    assert not [m for m in sys.modules if m.startswith("tapas_tf")], "the SavedModel must stand alone"
    pickle.dump(out, open(sys.argv[2], "wb"))
""")


def write_retriever_dir(model_dir, vocab_file, seed: int = 0, **encoder_options):
    """A dual-encoder directory with a tiny random model; returns (model, config)."""
    encoder = tiny_config(vocab_size=len(vocab_tokens(EXTRA_WORDS)), **encoder_options)
    config = DualEncoderConfig(encoder=encoder, projection_dim=DIMENSION, pooling="pooled", share_encoders=False,
                               max_query_length=12, max_table_length=64)
    tf_keras.utils.set_random_seed(seed)
    model = TableDualEncoder(config)
    model(dummy_retrieval_features())
    retriever.write_dual_encoder_dir(model, config, str(model_dir), {"format": "test"}, vocab_file)
    return model, config


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The model, its directory and its export (version 1, with the LiteRT query tower)."""
    root = tmp_path_factory.mktemp("retriever")
    vocab = write_test_vocab(root / "vocab.txt", extra_words=EXTRA_WORDS)
    # Absolute positions, as Google's retrievers and init-from-bert's: the LiteRT copy takes any batch.
    model, config = write_retriever_dir(root / "model", vocab, reset_position_index_per_cell=False)
    export_dir = root / "export"
    path = retriever_export.export_retriever(str(root / "model"), str(export_dir))
    return {"model": model, "config": config, "model_dir": str(root / "model"), "export_dir": str(export_dir),
            "path": path, "vocab": vocab, "loaded": tf.saved_model.load(path)}


def _queries(length: int, batch: int = 3, seed: int = 0):
    """input_ids, input_mask <int32>[batch, length], rows after the first padded."""
    return retriever_export.sample_queries(length, batch, len(vocab_tokens(EXTRA_WORDS)), seed)


def _table_batches(config, vocab):
    """The table tower's inputs of one table and of two (a longer batch), as DenseRetriever builds them."""
    features = DenseRetriever.features_for(config, vocab)
    encoded = [features.table(make_table(f"t{i}", header, rows), title=title)
               for i, (title, header, rows) in enumerate(TABLES)]
    return {"one_table": stack_tables(encoded[:1]), "two_tables": stack_tables(encoded)}


def _run(signature, inputs):
    return signature(**{k: tf.constant(v) for k, v in inputs.items()})["embeddings"].numpy()


# --- the SavedModel ---------------------------------------------------------------------------


def test_the_signatures_take_any_batch_and_length(exported):
    signatures = exported["loaded"].signatures
    assert set(signatures) == SIGNATURES
    expected_inputs = {"query_embedding": ("input_ids", "input_mask"), "table_embedding": TABLE_INPUT_FEATURES,
                       "serving_default": ("input_ids", "input_mask")}
    for name, inputs in expected_inputs.items():
        _, specs = signatures[name].structured_input_signature
        assert set(specs) == set(inputs)
        assert all(spec.shape.as_list() == [None, None] and spec.dtype == tf.int32 for spec in specs.values())
        (output,) = signatures[name].structured_outputs.values()
        assert list(signatures[name].structured_outputs) == ["embeddings"]
        assert output.shape.as_list() == [None, DIMENSION] and output.dtype == tf.float32


@pytest.mark.parametrize("length", [5, 12])
def test_query_embedding_equals_embed_queries(exported, length):
    input_ids, input_mask = _queries(length)
    expected = exported["model"].embed_queries(tf.constant(input_ids), tf.constant(input_mask)).numpy()
    inputs = {"input_ids": input_ids, "input_mask": input_mask}
    for name in ("query_embedding", "serving_default"):
        got = _run(exported["loaded"].signatures[name], inputs)
        assert got.shape == (3, DIMENSION)
        np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_table_embedding_equals_embed_tables(exported):
    batches = _table_batches(exported["config"], exported["vocab"])
    assert batches["one_table"]["input_ids"].shape[1] < batches["two_tables"]["input_ids"].shape[1]
    for inputs in batches.values():
        expected = exported["model"].embed_tables({k: tf.constant(v) for k, v in inputs.items()}).numpy()
        got = _run(exported["loaded"].signatures["table_embedding"], inputs)
        np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    # The towers differ (two encoders): each signature runs its own.
    question = _run(exported["loaded"].signatures["query_embedding"],
                    {k: batches["one_table"][k] for k in ("input_ids", "input_mask")})
    assert np.abs(question - _run(exported["loaded"].signatures["table_embedding"], batches["one_table"])).max() > 1e-3


def test_bad_inputs_fail_with_a_message(exported):
    signatures = exported["loaded"].signatures
    input_ids, input_mask = _queries(8)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_mask must have the shape of input_ids"):
        signatures["query_embedding"](input_ids=tf.constant(input_ids), input_mask=tf.constant(input_mask[:, :-1]))
    too_long = np.ones([1, 257], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than the 256 positions of the model"):
        signatures["query_embedding"](input_ids=tf.constant(too_long), input_mask=tf.constant(too_long))
    tables = {k: tf.constant(v) for k, v in _table_batches(exported["config"], exported["vocab"])["one_table"].items()}
    tables["row_ids"] = tables["row_ids"][:, :-1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="row_ids must have the shape of input_ids"):
        signatures["table_embedding"](**tables)


def test_assets_extra_hold_the_config_the_vocabulary_and_the_model_id(exported):
    assets = os.path.join(exported["path"], "assets.extra")
    assert sorted(os.listdir(assets)) == ["dual_encoder.json", "embedder.json", "vocab.txt"]
    with open(os.path.join(assets, "dual_encoder.json")) as f:
        assert DualEncoderConfig.from_dict(json.load(f)) == exported["config"]
    with open(os.path.join(assets, "vocab.txt")) as f, open(exported["vocab"]) as g:
        assert f.read() == g.read()
    with open(os.path.join(assets, "embedder.json")) as f, \
            open(os.path.join(exported["model_dir"], "embedder.json")) as g:
        record = json.load(f)
        assert record == json.load(g)
    assert record["dimension"] == DIMENSION and record["model_id"].startswith("dual_encoder-")


def test_the_fresh_process_needs_no_tapas_tf(exported, tmp_path):
    input_ids, input_mask = _queries(9)
    query = {"input_ids": input_ids, "input_mask": input_mask}
    tables = _table_batches(exported["config"], exported["vocab"])["two_tables"]
    with open(tmp_path / "in.pkl", "wb") as f:
        pickle.dump((exported["path"], query, tables), f)
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(tmp_path / "in.pkl"), str(tmp_path / "out.pkl")],
                            cwd=str(tmp_path), env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "out.pkl", "rb") as f:
        served = pickle.load(f)
    model = exported["model"]
    np.testing.assert_allclose(served["query_embedding"], model.embed_queries(tf.constant(input_ids),
                                                                            tf.constant(input_mask)).numpy(), atol=ATOL)
    np.testing.assert_allclose(served["table_embedding"], model.embed_tables(
        {k: tf.constant(v) for k, v in tables.items()}).numpy(), atol=ATOL)


# --- versions and checkpoints -----------------------------------------------------------------


def test_an_existing_version_is_refused_and_the_next_is_the_default(exported, tmp_path):
    export_dir = str(tmp_path / "export")
    shutil.copytree(exported["export_dir"], export_dir)
    with pytest.raises(FileExistsError, match=f"{os.path.join(export_dir, '1')} exists"):
        retriever_export.export_retriever(exported["model_dir"], export_dir, version=1, lite=False)
    with pytest.raises(ValueError, match="positive integer"):
        retriever_export.export_retriever(exported["model_dir"], export_dir, version=0, lite=False)
    path = retriever_export.export_retriever(exported["model_dir"], export_dir, lite=False)
    assert path == os.path.join(export_dir, "2")
    assert sorted(os.listdir(export_dir)) == ["1", "2"]  # No staging directory left behind.
    loaded = tf.saved_model.load(path)
    input_ids, input_mask = _queries(7)
    np.testing.assert_allclose(_run(loaded.signatures["query_embedding"], {"input_ids": input_ids,
                                                                           "input_mask": input_mask}),
                               exported["model"].embed_queries(tf.constant(input_ids), tf.constant(input_mask)),
                               atol=ATOL)


def test_the_recorded_checkpoint_is_exported_unless_another_is_given(exported, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(exported["model_dir"], model_dir)
    model = exported["model"]
    originals = [v.numpy() for v in model.query_projection.weights]
    try:
        for variable in model.query_projection.weights:
            variable.assign(variable * 2.0)
        newer = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), model_dir_lib.checkpoint_dir(str(model_dir)),
                                           max_to_keep=2).save(checkpoint_number=1)
    finally:
        for variable, value in zip(model.query_projection.weights, originals):
            variable.assign(value)
    assert model_dir_lib.latest_checkpoint(str(model_dir)) == newer
    input_ids, input_mask = _queries(6)
    inputs = {"input_ids": input_ids, "input_mask": input_mask}
    expected = model.embed_queries(tf.constant(input_ids), tf.constant(input_mask)).numpy()
    records = {}
    for name, checkpoint, factor in (("recorded", None, 1.0), ("newer", newer, 2.0)):
        path = retriever_export.export_retriever(str(model_dir), str(tmp_path / name), checkpoint=checkpoint, lite=False)
        got = _run(tf.saved_model.load(path).signatures["query_embedding"], inputs)
        np.testing.assert_allclose(got, expected * factor, atol=ATOL * factor)  # The projection is linear.
        with open(os.path.join(path, "assets.extra", "embedder.json")) as f:
            records[name] = json.load(f)
    with open(model_dir / "embedder.json") as f:
        assert records["recorded"] == json.load(f)
    assert records["newer"]["checkpoint"] == os.path.join("checkpoints", "ckpt-1")
    assert records["newer"]["model_id"] != records["recorded"]["model_id"]


def test_what_is_not_a_dual_encoder_directory_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"model directory {tmp_path / 'none'} does not exist"):
        retriever_export.export_retriever(str(tmp_path / "none"), str(tmp_path / "export"))
    qa_dir = tmp_path / "qa"
    model_dir_lib.save_config(str(qa_dir), tiny_config())
    with pytest.raises(ValueError, match=r"qa is not a dual-encoder directory: it has no dual_encoder.json.*"
                                         r"tapas-tf export"):
        retriever_export.export_retriever(str(qa_dir), str(tmp_path / "export"))
    assert not os.path.exists(tmp_path / "export")


# --- the LiteRT query tower -------------------------------------------------------------------


def test_the_lite_copy_embeds_as_tensorflow_does_at_any_batch_and_length(exported):
    from ai_edge_litert.interpreter import Interpreter

    path = os.path.join(exported["model_dir"], "query_tower.tflite")
    interpreter = Interpreter(model_path=path, num_threads=1)
    assert interpreter.get_signature_list() == {"query_embedding": {"inputs": ["input_ids", "input_mask"],
                                                                    "outputs": ["embeddings"]}}
    runner = interpreter.get_signature_runner("query_embedding")
    for length, batch in ((4, 1), (12, 3)):
        input_ids, input_mask = _queries(length, batch, seed=length)
        expected = exported["model"].embed_queries(tf.constant(input_ids), tf.constant(input_mask)).numpy()
        got = runner(input_ids=input_ids, input_mask=input_mask)["embeddings"]
        np.testing.assert_allclose(got, expected, atol=lite_export.TOLERANCE, rtol=0)
    with open(os.path.join(exported["model_dir"], "query_tower.tflite.json")) as f:
        info = json.load(f)
    with open(os.path.join(exported["model_dir"], "embedder.json")) as f:
        record = json.load(f)
    assert info["batch_size"] is None and info["dimension"] == DIMENSION
    assert info["model_id"] == record["model_id"] and info["signature"] == "query_embedding"
    assert info["bytes"] == os.path.getsize(path)


def test_a_lite_copy_that_differs_from_tensorflow_is_not_written(exported, tmp_path, monkeypatch):
    model, config = exported["model"], exported["config"]
    with open(os.path.join(exported["model_dir"], "query_tower.tflite"), "rb") as f:
        flatbuffer = f.read()
    function = retriever_export.query_function(model, None)
    retriever_export.check_query_tower(flatbuffer, function, config, None)  # Passes as written.
    monkeypatch.setattr(lite_export, "TOLERANCE", -1.0)  # Any difference, even 0, is too much.
    with pytest.raises(ValueError, match="differ from TensorFlow's .* nothing was written"):
        retriever_export.check_query_tower(flatbuffer, function, config, None)

    def failing(model, config):
        raise ValueError("the LiteRT query tower's embeddings differ; nothing was written")

    model_dir = tmp_path / "model"
    shutil.copytree(exported["model_dir"], model_dir, ignore=shutil.ignore_patterns("query_tower.*"))
    monkeypatch.setattr(retriever_export, "convert_query_tower", failing)
    with pytest.raises(ValueError, match="nothing was written"):
        retriever_export.export_retriever(str(model_dir), str(tmp_path / "export"))
    assert not os.path.exists(tmp_path / "export") or not os.listdir(tmp_path / "export")
    assert not [name for name in os.listdir(model_dir) if name.startswith("query_tower")]


def test_an_encoder_with_cell_positions_gets_a_copy_of_batch_one(exported, tmp_path):
    """Its cell positions convert to builtin ops at batch 1 only; the client loops over questions."""
    write_retriever_dir(tmp_path / "model", exported["vocab"], seed=3, reset_position_index_per_cell=True)
    path = retriever_export.export_query_tower(str(tmp_path / "model"))
    assert path == str(tmp_path / "model" / "query_tower.tflite")
    with open(tmp_path / "model" / "query_tower.tflite.json") as f:
        assert json.load(f)["batch_size"] == 1
    client = RetrieverServingClient.from_lite(str(tmp_path / "model"))
    expected = DenseRetriever.from_model_dir(str(tmp_path / "model")).embed_questions(QUESTIONS)
    np.testing.assert_allclose(client.embed_questions(QUESTIONS), expected, atol=lite_export.TOLERANCE, rtol=0)


# --- the client -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dense(exported):
    """What the client must match: DenseRetriever on the model directory."""
    retriever_ = DenseRetriever.from_model_dir(exported["model_dir"])
    return {"vectors": retriever_.embed_questions(QUESTIONS), "model_id": retriever_.model_id, "cuts": retriever_.cuts}


def test_the_saved_model_client_embeds_strings_as_dense_retriever_does(exported, dense):
    client = RetrieverServingClient.from_saved_model(exported["export_dir"], batch_size=3)  # Two calls.
    vectors = client.embed_questions(QUESTIONS)
    assert vectors.shape == (len(QUESTIONS), DIMENSION) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, dense["vectors"], atol=ATOL, rtol=0)
    assert client.model_id == dense["model_id"] and client.dimension == DIMENSION and client.similarity == "dot"
    assert client.cuts == dense["cuts"] and client.cuts["question_pieces_cut"] > 0
    assert client.embed_questions([]).shape == (0, DIMENSION)
    with pytest.raises(TypeError, match="a list of questions"):
        client.embed_questions("how tall is torre jaume")


def test_the_lite_client_embeds_strings_as_dense_retriever_does(exported, dense):
    client = RetrieverServingClient.from_lite(exported["model_dir"])
    np.testing.assert_allclose(client.embed_questions(QUESTIONS), dense["vectors"], atol=lite_export.TOLERANCE, rtol=0)
    assert client.model_id == dense["model_id"]


def test_the_rest_client_sends_the_query_embedding_signature(exported, dense):
    signature = exported["loaded"].signatures["query_embedding"]
    sent = []

    def transport(url, body, timeout):  # TF Serving's REST API, run in process.
        sent.append((url, body))
        inputs = {name: np.asarray(values, np.int32) for name, values in body["inputs"].items()}
        return {"outputs": {"embeddings": _run(signature, inputs).tolist()}}

    client = RetrieverServingClient.from_url("http://localhost:8501/v1/models/retriever", exported["export_dir"],
                                             transport=transport)
    np.testing.assert_allclose(client.embed_questions(QUESTIONS), dense["vectors"], atol=ATOL, rtol=0)
    ((url, body),) = sent
    assert url == "http://localhost:8501/v1/models/retriever:predict"
    assert body["signature_name"] == "query_embedding" and set(body["inputs"]) == {"input_ids", "input_mask"}
    json.dumps(body)  # Plain JSON.
    assert np.shape(body["inputs"]["input_ids"]) == (len(QUESTIONS), 12)  # Cut to max_query_length.


def test_a_lite_record_of_another_copy_is_refused(exported, tmp_path):
    for name in ("query_tower.tflite", "query_tower.tflite.json", "dual_encoder.json"):
        shutil.copyfile(os.path.join(exported["model_dir"], name), tmp_path / name)
    info = json.loads((tmp_path / "query_tower.tflite.json").read_text())
    (tmp_path / "query_tower.tflite.json").write_text(json.dumps({**info, "sha256": "0" * 64}))
    with pytest.raises(ValueError, match="is not the copy query_tower.tflite.json describes"):
        RetrieverServingClient.from_lite(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="export-retriever"):
        RetrieverServingClient.from_lite(str(tmp_path / "none"))
    assert retriever_client.query_request(np.zeros([1, 3]), np.ones([1, 3]))["inputs"]["input_mask"] == [[1, 1, 1]]


# --- the command ------------------------------------------------------------------------------


def test_the_command_exports_and_refuses_in_one_line(exported, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(exported["model_dir"], model_dir, ignore=shutil.ignore_patterns("query_tower.*"))
    export_dir = tmp_path / "export"
    result = run_command("export-retriever", f"--model_dir={model_dir}", f"--export_dir={export_dir}", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line == {"export": str(export_dir / "1"), "lite": str(model_dir / "query_tower.tflite"),
                    "model_id": json.loads((model_dir / "embedder.json").read_text())["model_id"],
                    "dimension": DIMENSION}
    assert (export_dir / "1" / "saved_model.pb").exists() and (model_dir / "query_tower.tflite").exists()

    prog = "tapas-tf export-retriever"
    result = run_command("export-retriever", f"--model_dir={model_dir}", f"--export_dir={export_dir}", "--version=1",
                         "--nolite", cwd=str(tmp_path))
    assert_one_line_error(result, prog, f"{export_dir / '1'} exists", exit_code=1)
    result = run_command("export-retriever", f"--model_dir={tmp_path / 'none'}", f"--export_dir={export_dir}",
                         cwd=str(tmp_path))
    assert_one_line_error(result, prog, f"model directory {tmp_path / 'none'} does not exist", exit_code=1)
    model_dir_lib.save_config(str(tmp_path / "qa"), tiny_config())
    result = run_command("export-retriever", f"--model_dir={tmp_path / 'qa'}", f"--export_dir={export_dir}",
                         cwd=str(tmp_path))
    assert_one_line_error(result, prog, "is not a dual-encoder directory", exit_code=1)
    result = run_command("export-retriever", f"--model_dir={model_dir}", cwd=str(tmp_path))
    assert_one_line_error(result, prog, "--export_dir is required")
    assert os.listdir(export_dir) == ["1"]
