"""Compact (float16) model directories, and the model bundled with the package."""

import gzip
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import (
    compact,  # noqa: E402
    model_dir as model_dir_lib,  # noqa: E402
)
from tapas_tf.checkpoints.bundled import BUNDLED_DIR, bundled_model_dir  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tests.inference.test_sequential import (  # noqa: E402, F401 (trained is a fixture)
    HEADER,
    ROWS,
    SEQ,
    save_model_dir,
    trained,
)
from tests.command_runner import run_command  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402
from tests.vocab_fixture import write_test_vocab  # noqa: E402

MAX_BUNDLED_BYTES = 10 * 1024 * 1024


def _random_model_dir(path, scale: float = 1.0) -> str:
    config = tiny_config(num_aggregation_labels=4)
    tf_keras.utils.set_random_seed(3)
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8))
    for variable in model.weight_map().values():  # Random heads too, so that answers select cells.
        variable.assign(np.random.default_rng(0).normal(0, 0.05, variable.shape).astype(np.float32) * scale)
    save_model_dir(path, model, config)
    return str(path)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return _random_model_dir(tmp_path_factory.mktemp("source") / "model")


@pytest.fixture(scope="module")
def compacted(source, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("compact") / "model")
    return out, compact.write_compact_model_dir(source, out, notes={"why": "a test"})


def test_compact_directory_holds_float16_weights_and_their_provenance(source, compacted):
    out, info = compacted
    assert sorted(os.listdir(out)) == [compact.INFO_FILE, model_dir_lib.CONFIG_FILE, compact.WEIGHTS_FILE]
    original = model_dir_lib.load_model(source).weight_map()
    with np.load(os.path.join(out, compact.WEIGHTS_FILE)) as stored:
        assert sorted(stored.files) == sorted(original)
        assert all(stored[name].dtype == np.float16 for name in stored.files)
        worst = max(float(np.max(np.abs(stored[n].astype(np.float32) - original[n].numpy()))) for n in stored.files)
    assert info == json.load(open(os.path.join(out, compact.INFO_FILE)))
    assert info["max_abs_rounding_error"] == pytest.approx(worst) and 0 < worst < 1e-3
    assert info["parameters"] == sum(int(np.prod(v.shape)) for v in original.values())
    assert info["notes"] == {"why": "a test"} and info["source_checkpoint"].endswith("ckpt-1")
    assert model_dir_lib.load_config(out) == model_dir_lib.load_config(source)


def test_compact_model_loads_in_float32_with_the_rounded_weights(source, compacted):
    out, _ = compacted
    restored = model_dir_lib.load_model(out)
    assert all(v.dtype == "float32" for v in restored.weights)
    with np.load(os.path.join(out, compact.WEIGHTS_FILE)) as stored:
        for name, variable in restored.weight_map().items():
            np.testing.assert_array_equal(variable.numpy(), stored[name].astype(np.float32))
    features = dummy_features(2, 16)
    original = model_dir_lib.load_model(source)(features, training=False)
    again = restored(features, training=False)
    np.testing.assert_allclose(again["probabilities"], original["probabilities"], atol=2e-3)


def test_table_qa_answers_alike_from_the_compact_directory(source, compacted, tmp_path):
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    table = pd.DataFrame(ROWS, columns=HEADER)
    full = TableQA.from_model_dir(source, vocab_file=vocab).answer(table, "which city?")
    small = TableQA.from_model_dir(compacted[0], vocab_file=vocab).answer(table, "which city?")
    assert small.coordinates == full.coordinates
    np.testing.assert_allclose([c.probability for c in small.cells], [c.probability for c in full.cells], atol=2e-3)


def test_compact_writing_refuses_weights_beyond_float16_and_an_existing_directory(source, compacted, tmp_path):
    with pytest.raises(ValueError, match="already holds a model directory"):
        compact.write_compact_model_dir(source, compacted[0])
    huge = _random_model_dir(tmp_path / "huge", scale=1e7)
    with pytest.raises(ValueError, match=r"variable .* beyond float16's largest value"):
        compact.write_compact_model_dir(huge, str(tmp_path / "out"))


def test_damaged_or_foreign_weights_are_named(compacted, tmp_path):
    out = tmp_path / "damaged"
    model_dir_lib.save_config(str(out), model_dir_lib.load_config(compacted[0]))
    (out / compact.WEIGHTS_FILE).write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match=f"{compact.WEIGHTS_FILE}: not a readable weights file"):
        model_dir_lib.load_model(str(out))
    with np.load(os.path.join(compacted[0], compact.WEIGHTS_FILE)) as stored:
        weights = {name: stored[name] for name in stored.files if name != "output_bias"}
    np.savez(out / compact.WEIGHTS_FILE, **weights)
    with pytest.raises(ValueError, match=r"does not fit the model .* missing \['output_bias'\]"):
        model_dir_lib.load_model(str(out))
    os.remove(out / compact.WEIGHTS_FILE)
    with pytest.raises(FileNotFoundError, match="no checkpoint under checkpoints/ and no weights_float16.npz"):
        model_dir_lib.load_model(str(out))


# --- int8 weights ---------------------------------------------------------------------------------


def test_int8_quantisation_of_a_hand_checked_matrix():
    kernel = np.array([[1.27, -0.5], [0.0, 2.54], [-0.635, 0.0]], np.float32)  # [in, out]: a scale per column
    values, scales = compact.to_int8("layer/kernel", kernel)
    np.testing.assert_allclose(scales, [[0.01, 0.02]], rtol=1e-6)
    np.testing.assert_array_equal(values, [[127, -25], [0, 127], [-64, 0]])  # -63.5 rounds to even, -64
    table = np.array([[0.0, 0.0], [1.0, -0.5]], np.float32)  # an embedding table: a scale per row
    values, scales = compact.to_int8("bert/embeddings/word_embeddings", table)
    np.testing.assert_allclose(scales, [[1.0], [1 / 127]], rtol=1e-6)  # an all-zero row keeps scale 1
    np.testing.assert_array_equal(values, [[0, 0], [127, -64]])
    with pytest.raises(ValueError, match="variable x has non-finite values"):
        compact.to_int8("x", np.array([[np.nan, 1.0]]))


def test_int8_directory_is_smaller_and_answers_alike(source, compacted, tmp_path):
    out = str(tmp_path / "int8")
    info = compact.write_compact_model_dir(source, out, weights="int8")
    assert sorted(os.listdir(out)) == [compact.INFO_FILE, model_dir_lib.CONFIG_FILE, compact.INT8_WEIGHTS_FILE]
    assert info["weights"] == "int8" and info["weights_bytes"] < compacted[1]["weights_bytes"]
    original = model_dir_lib.load_model(source).weight_map()
    with np.load(os.path.join(out, compact.INT8_WEIGHTS_FILE)) as stored:
        matrices = [n for n in original if len(original[n].shape) >= 2]
        assert matrices and all(stored[n].dtype == np.int8 for n in matrices)
        assert all(stored[n].dtype == np.float16 for n in original if n not in matrices)
        assert sorted(stored.files) == sorted(list(original) + [n + compact.SCALE_SUFFIX for n in matrices])
    restored = model_dir_lib.load_model(out).weight_map()
    for name, variable in original.items():  # Within half a step of the slice's scale.
        np.testing.assert_allclose(restored[name].numpy(), variable.numpy(), atol=info["max_abs_rounding_error"] + 1e-7)
    assert 0 < info["max_abs_rounding_error"] < 0.05 * 0.5 * 5 / 127 * 1.01 + 1e-3
    features = dummy_features(2, 16)
    np.testing.assert_allclose(model_dir_lib.load_model(out)(features, training=False)["probabilities"],
                               model_dir_lib.load_model(source)(features, training=False)["probabilities"], atol=2e-2)
    with pytest.raises(ValueError, match="weights must be one of"):
        compact.write_compact_model_dir(source, str(tmp_path / "other"), weights="int4")


# --- the bundled model ------------------------------------------------------------------------


def test_bundled_model_is_small_documented_and_answers():
    directory = bundled_model_dir()
    assert directory == BUNDLED_DIR
    assert os.path.getsize(os.path.join(directory, compact.WEIGHTS_FILE)) <= MAX_BUNDLED_BYTES
    info = json.load(open(os.path.join(directory, compact.INFO_FILE)))
    notes = info["notes"]
    assert {"commands", "sqa_dev_predicted_previous", "sqa_dev_gold_previous"} <= set(notes)
    assert 0 < notes["sqa_dev_predicted_previous"]["ALL"] <= 1
    config = model_dir_lib.load_config(directory)
    assert (config.hidden_size, config.num_hidden_layers) == (128, 2)

    table = pd.DataFrame({"Rank": ["1", "2", "3"], "Nation": ["Soviet Union", "East Germany", "United States"],
                          "Gold": ["55", "37", "36"]})
    result = TableQA.from_model_dir().answer(table, "which nation won the most gold medals?")
    assert all(0 <= row < 3 and 0 <= column < 3 for row, column in result.coordinates)


def test_sequential_prediction_runs_on_a_compact_directory(trained, tmp_path):  # noqa: F811
    from tapas_tf.features.conversion_config import ConversionConfig
    from tapas_tf.inference import sequential

    out = str(tmp_path / "compact")
    compact.write_compact_model_dir(trained["model_dir"], out)
    config = ConversionConfig(vocab_file=trained["vocab"], max_seq_length=SEQ)
    full = sequential.predict_model_dir(trained["model_dir"], trained["file"], "dev", config, evaluate=True,
                                        show_progress=False)
    small = sequential.predict_model_dir(out, trained["file"], "dev", config, evaluate=True, show_progress=False)
    assert small.step == full.step == model_dir_lib.compact_source_step(out) > 0
    assert [p.coordinates for p in small.run.predictions] == [p.coordinates for p in full.run.predictions]
    # Equal to the float32 checkpoint's, whatever the fit: how well the fixture learned its few
    # questions depends on the CPU's kernels, not on the compact format.
    assert small.metrics["ALL"] == full.metrics["ALL"] > 0


def test_bundle_command_writes_a_compact_directory_with_its_dev_scores(source, tmp_path):
    """`tapas-tf bundle --out_dir=...`: float16 weights, the vocabulary, and the dev scores it read."""
    predictions = os.path.join(source, "predictions")
    os.makedirs(predictions, exist_ok=True)
    out = tmp_path / "bundle" / "wtq"
    result = run_command("bundle", "--role=aggregation", f"--model_dir={source}", f"--out_dir={out}")
    assert result.returncode == 1 and result.stderr.strip() == (
        f"tapas-tf bundle: error: {predictions}: neither wtq_dev_metrics.json nor dev_metrics.json; evaluate the "
        "model on WTQ's dev set first (tapas-tf predict-and-evaluate --task=WTQ --predict_split=dev)")
    with open(os.path.join(predictions, "dev_metrics.json"), "w") as f:  # SQA's: not the aggregation model's.
        json.dump({"ALL": 0.3}, f)
    result = run_command("bundle", "--role=aggregation", f"--model_dir={source}", f"--out_dir={out}")
    assert result.returncode == 1 and "dev_metrics.json: not WTQ's metrics (no denotation_accuracy)" in result.stderr
    with open(os.path.join(predictions, "dev_metrics.json"), "w") as f:  # What predict-and-evaluate --task=WTQ writes.
        json.dump({"denotation_accuracy": 0.25}, f)
    result = run_command("bundle", "--role=aggregation", f"--model_dir={source}", f"--out_dir={out}",
                         "--note=a test", "--command=train it")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out)) == sorted([compact.INFO_FILE, model_dir_lib.CONFIG_FILE, compact.WEIGHTS_FILE,
                                              "vocab.txt"])
    with open(out / compact.INFO_FILE) as f:
        notes = json.load(f)["notes"]
    assert notes == {"about": "a test", "role": "aggregation", "commands": ["train it"],
                     "wtq_dev": {"denotation_accuracy": 0.25}}
    assert "bundled weights" in result.stdout


def test_bundle_writes_the_union_of_the_stages_table_manifests(source, tmp_path):
    """`--training_tables` once per stage: the bundle's training_tables.txt.gz is their sorted union,
    and compact.json counts it; a bad manifest line stops the bundle before anything is written."""
    predictions = os.path.join(source, "predictions")
    os.makedirs(predictions, exist_ok=True)
    with open(os.path.join(predictions, "wtq_dev_metrics.json"), "w") as f:
        json.dump({"denotation_accuracy": 0.25}, f)
    synthetic = tmp_path / "synthetic_tables.txt.gz"
    with gzip.open(synthetic, "wt") as f:
        f.write("page:204-page/590#0\nwtq:csv/204-csv/590.csv\n")
    finetuning = tmp_path / "training_tables_wtq.txt"
    finetuning.write_text("wtq:csv/204-csv/590.csv\nwtq:csv/203-csv/1.csv\n\n")
    out = tmp_path / "bundle" / "wtq"
    result = run_command("bundle", "--role=aggregation", f"--model_dir={source}", f"--out_dir={out}",
                         f"--training_tables={synthetic}", f"--training_tables={finetuning}")
    assert result.returncode == 0, result.stderr
    with gzip.open(out / "training_tables.txt.gz", "rt") as f:
        assert f.read() == "page:204-page/590#0\nwtq:csv/203-csv/1.csv\nwtq:csv/204-csv/590.csv\n"
    with open(out / compact.INFO_FILE) as f:
        assert json.load(f)["notes"]["training_tables"] == {
            "file": "training_tables.txt.gz", "tables": 3,
            "stages": ["synthetic_tables.txt.gz", "training_tables_wtq.txt"]}
    bad = tmp_path / "bad.txt"
    bad.write_text("wtq:csv/204-csv/590.csv\ncsv/204-csv/591.csv\n")
    other = tmp_path / "bundle" / "other"
    result = run_command("bundle", "--role=aggregation", f"--model_dir={source}", f"--out_dir={other}",
                         f"--training_tables={bad}")
    assert result.returncode == 1 and result.stderr.strip().startswith(
        f"tapas-tf bundle: error: {bad}:2: not a manifest line")
    assert not other.exists()


def test_every_bundled_model_lists_the_tables_it_was_trained_on():
    """The data rule's record: each bundled model's (readers and retriever) training_tables.txt.gz, one `SOURCE:NAME` per
    table, as many as its compact.json says, with no evaluation split's kind of name."""
    from tapas_tf.checkpoints.bundled import BUNDLED_ROOT
    from tapas_tf.data import table_manifest

    directories = [os.path.join(BUNDLED_ROOT, name) for name in sorted(os.listdir(BUNDLED_ROOT))
                   if os.path.isdir(os.path.join(BUNDLED_ROOT, name))]
    bundles = [d for d in directories if os.path.exists(os.path.join(d, compact.INFO_FILE))]
    assert {os.path.basename(d) for d in bundles} >= {"sqa_tiny", "wtq_tiny", "retriever_minilm"}
    for directory in bundles:
        names = table_manifest.read_manifest(os.path.join(directory, table_manifest.MANIFEST_FILE))
        info = json.load(open(os.path.join(directory, compact.INFO_FILE)))
        assert info["notes"]["training_tables"]["tables"] == len(names) > 1000, directory
        assert all(name.split(":", 1)[0] in {"wtq", "sqa", "tabfact", "page"} for name in names), directory
        assert len(set(names)) == len(names) and names == sorted(names), directory
