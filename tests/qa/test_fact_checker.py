"""TableFactChecker: P(entailed) is the softmax of the model's own classification logits, through
either backend, and the TF Serving export returns the same number; bad models are refused."""

import math
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import bundled  # noqa: E402
from tapas_tf.qa.fact_checker import TableFactChecker, VerifyResult, entailed_probability  # noqa: E402
from tapas_tf.qa.tables import AskError  # noqa: E402
from tests.inference.test_sequential import write_random_model_dir  # noqa: E402

TABFACT_OPTIONS = dict(num_classification_labels=2, disable_per_token_loss=True, max_position_embeddings=512)
TABLE = pd.DataFrame({"city": ["paris", "berlin", "london"], "country": ["france", "germany", "england"],
                      "population": ["2", "4", "8"]})
STATEMENTS = ["paris is in france", "london has the most population", "berlin is in england"]


@pytest.fixture(scope="module")
def tabfact_model_dir(tmp_path_factory):
    """A tiny untrained TabFact model (a 2-class head on the pooled output), vocabulary inside."""
    return write_random_model_dir(tmp_path_factory.mktemp("tabfact") / "model", **TABFACT_OPTIONS)


@pytest.fixture(scope="module")
def checker(tabfact_model_dir):
    return TableFactChecker.from_model_dir(tabfact_model_dir, backend="tensorflow")


def test_entailed_probability_by_hand():
    logits = np.array([[0.0, math.log(3.0)], [2.0, 2.0], [1000.0, 0.0]], np.float32)
    np.testing.assert_allclose(entailed_probability(logits), [0.75, 0.5, 0.0], atol=1e-7)


def _keras_probability(checker, statement):
    encoded = checker.encoder.encode(checker.encoder.prepare(TABLE), statement)
    features = {name: tf.constant(value[None], tf.int32) for name, value in encoded.features.items()}
    logits = checker.runner.model(features, training=False)["classification_logits"].numpy()[0]
    return float(np.exp(logits[1]) / np.exp(logits).sum())


def test_verify_gives_the_softmax_of_the_model_logits(checker):
    result = checker.verify(TABLE, STATEMENTS[0])
    assert isinstance(result, VerifyResult) and result.statement == STATEMENTS[0]
    assert result.probability == pytest.approx(_keras_probability(checker, STATEMENTS[0]), abs=1e-6)
    assert result.entailed == (result.probability >= 0.5)
    assert result.verdict == ("entailed" if result.entailed else "refuted")
    assert result.model == "model"
    assert list(result.table.columns) == ["city", "country", "population"] and list(result.table.index) == [0, 1, 2]
    as_json = result.to_dict()
    assert set(as_json) == {"statement", "entailed", "verdict", "probability", "model", "diagnostics"}


def test_verify_many_equals_one_by_one_and_reads_csv_paths(checker, tmp_path):
    path = tmp_path / "cities.csv"
    TABLE.to_csv(path, index=False)
    batched = checker.verify_many(str(path), STATEMENTS)
    for statement, result in zip(STATEMENTS, batched):
        assert result.probability == pytest.approx(checker.verify(TABLE, statement).probability, abs=1e-5)
    with pytest.raises(AskError, match="takes a list of statements"):
        checker.verify_many(TABLE, "one statement")
    with pytest.raises(AskError, match="empty"):
        checker.verify(TABLE, "  ")


def test_the_threshold_decides_the_verdict(tabfact_model_dir):
    probability = TableFactChecker.from_model_dir(tabfact_model_dir).verify(TABLE, STATEMENTS[1]).probability
    low = TableFactChecker.from_model_dir(tabfact_model_dir, threshold=max(probability - 0.01, 0.001))
    high = TableFactChecker.from_model_dir(tabfact_model_dir, threshold=min(probability + 0.01, 0.999))
    assert low.verify(TABLE, STATEMENTS[1]).entailed and not high.verify(TABLE, STATEMENTS[1]).entailed
    with pytest.raises(ValueError, match="threshold"):
        TableFactChecker.from_model_dir(tabfact_model_dir, threshold=1.5)


def test_a_question_answering_model_is_refused(tmp_path):
    qa_dir = write_random_model_dir(tmp_path / "qa")
    with pytest.raises(ValueError, match="0 classification labels; a TabFact model has 2"):
        TableFactChecker.from_model_dir(qa_dir)


def test_without_a_bundled_model_the_error_says_what_to_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(bundled, "TABFACT_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="pass a TabFact model directory"):
        bundled.bundled_tabfact_model_dir()


def test_the_litert_copy_gives_the_same_probabilities(tabfact_model_dir, checker):
    from tapas_tf.serving.lite_export import export_lite_model

    export_lite_model(tabfact_model_dir)
    lite = TableFactChecker.from_model_dir(tabfact_model_dir, backend="lite")
    assert lite.backend == "LiteRT"
    for statement, result in zip(STATEMENTS, lite.verify_many(TABLE, STATEMENTS)):
        assert result.probability == pytest.approx(checker.verify(TABLE, statement).probability, abs=1e-4)


def test_the_serving_signature_returns_p_entailed(tabfact_model_dir, checker, tmp_path):
    from tapas_tf.serving.export import PREDICT_FEATURES, export_model_dir

    version_dir = export_model_dir(tabfact_model_dir, str(tmp_path / "export"))
    loaded = tf.saved_model.load(version_dir)
    encoded = [checker.encoder.encode(checker.encoder.prepare(TABLE), s) for s in STATEMENTS[:2]]
    length = max(len(e.features["input_ids"]) for e in encoded)
    batch = {name: tf.constant(np.stack([np.pad(e.features[name], (0, length - len(e.features[name])))
                                         for e in encoded]), tf.int32) for name in encoded[0].features}
    outputs = loaded.signatures[PREDICT_FEATURES](**batch)
    np.testing.assert_allclose(outputs["entailed_probability"].numpy(),
                               [checker.verify(TABLE, s).probability for s in STATEMENTS[:2]], atol=1e-5)
    np.testing.assert_allclose(outputs["classification_probabilities"].numpy().sum(axis=-1), [1.0, 1.0],
                               atol=1e-6)
