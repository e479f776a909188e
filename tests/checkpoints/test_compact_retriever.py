"""A dual encoder as a compact directory (the bundled retriever's layout): written, loaded, bundled,
and found again by an index built with it."""

import json
import shutil

import numpy as np
import pytest

from tapas_tf.checkpoints import bundled, retriever
from tapas_tf.retrieval.collection import open_collection
from tapas_tf.retrieval.dense import DenseRetriever
from tapas_tf.retrieval.embedder import load_embedder
from tapas_tf.retrieval.table_index import TableIndex, build_index
from tests.command_runner import run_command
from tests.retrieval.test_dense import EXTRA_WORDS, _write_tables, write_tiny_retriever
from tests.vocab_fixture import write_test_vocab

QUESTIONS = ["how tall is torre", "how long is the danube", "what is the population of paris"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("compact_retriever")
    vocab = write_test_vocab(root / "vocab.txt", extra_words=EXTRA_WORDS)
    write_tiny_retriever(root / "model", vocab, seed=3)
    _write_tables(root / "tables")
    return root


@pytest.mark.parametrize("weights, tolerance", [("float16", 2e-3), ("int8", 3e-2)])
def test_compact_weights_embed_as_the_source_does(source, tmp_path, weights, tolerance):
    full = DenseRetriever.from_model_dir(str(source / "model"))
    info = retriever.write_compact_dual_encoder_dir(str(source / "model"), str(tmp_path / "c"), weights=weights,
                                                    notes={"about": "test"})
    compact = load_embedder(str(tmp_path / "c"))  # Through embedder.json, as the Beam job loads it.
    assert isinstance(compact, DenseRetriever)
    np.testing.assert_allclose(compact.embed_questions(QUESTIONS), full.embed_questions(QUESTIONS), atol=tolerance)
    tables = list(open_collection(str(source / "tables")))
    np.testing.assert_allclose(compact.embed_tables(tables), full.embed_tables(tables), atol=tolerance)
    # Rounded weights make other vectors: an index embedded by one model refuses the other.
    assert compact.model_id != full.model_id and compact.model_id.startswith("dual_encoder-")
    assert info["weights"] == weights and info["notes"] == {"about": "test"} and info["max_abs_rounding_error"] > 0
    # The towers are shared: the file holds the encoder once, under the table tower's names.
    stored = np.load(tmp_path / "c" / f"weights_{weights}.npz").files
    assert stored and not any(name.startswith("bert_1/") for name in stored)
    assert info["variables"] == len(retriever.compact_weight_map(full.model))


def test_a_compact_directory_refuses_to_be_overwritten_and_a_damaged_file_is_named(source, tmp_path):
    out = tmp_path / "c"
    retriever.write_compact_dual_encoder_dir(str(source / "model"), str(out), weights="int8")
    with pytest.raises(ValueError, match="already holds a dual encoder"):
        retriever.write_compact_dual_encoder_dir(str(source / "model"), str(out), weights="int8")
    (out / "weights_int8.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"weights_int8\.npz: not a readable weights file"):
        retriever.load_dual_encoder(str(out))


def test_an_index_built_with_the_bundled_retriever_finds_it_in_another_installation(source, tmp_path, monkeypatch):
    first = tmp_path / "install1" / "retriever_minilm"
    retriever.write_compact_dual_encoder_dir(str(source / "model"), str(first), weights="int8")
    monkeypatch.setattr(bundled, "RETRIEVER_DIR", str(first))
    assert bundled.bundled_retriever_dir() == str(first)
    dense = DenseRetriever.from_model_dir(str(first))
    build_index(open_collection(str(source / "tables")), str(tmp_path / "index"), progress=False, dense=dense)
    header = json.loads((tmp_path / "index" / "index.json").read_text())
    assert header["dense"]["bundled"] is True and header["default_method"] == "hybrid"
    # The package moves (a new virtualenv): the header's path is gone, the bundled copy is found.
    second = tmp_path / "install2" / "retriever_minilm"
    shutil.copytree(first, second)
    shutil.rmtree(first)
    monkeypatch.setattr(bundled, "RETRIEVER_DIR", str(second))
    index = TableIndex.load(str(tmp_path / "index"))
    assert len(index.search("how long is the danube", k=4, method="dense")) == 4  # Embedded by the copy.
    assert index.dense.model_dir == str(second)


def test_the_bundle_command_writes_a_retriever_with_its_evaluations(source, tmp_path):
    evaluation = tmp_path / "wtq_dev.json"
    evaluation.write_text(json.dumps({"default": "hybrid", "methods": {"hybrid": {"recall@10": 0.75}}}) + "\n")
    out = tmp_path / "bundled" / "retriever_minilm"
    result = run_command("bundle", "--role=retriever", f"--model_dir={source / 'model'}", f"--out_dir={out}",
                         "--weights=int8", f"--retrieval_evaluation=wtq_dev={evaluation}", "--note=a test retriever")
    assert result.returncode == 0, result.stderr[-2000:]
    info = json.loads((out / "compact.json").read_text())
    assert info["notes"]["retrieval"]["wtq_dev"]["methods"]["hybrid"]["recall@10"] == 0.75
    assert info["notes"]["role"] == "retriever" and (out / "embedder.json").exists() and (out / "vocab.txt").exists()
    assert "bundled weights" in result.stdout

    missing = run_command("bundle", "--role=retriever", f"--model_dir={source / 'model'}",
                          f"--out_dir={tmp_path / 'other'}")
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines()[-1].startswith("tapas-tf bundle: error: --role=retriever needs "
                                                               "--retrieval_evaluation")
