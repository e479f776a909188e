"""Dense retrieval end to end on tiny fixtures: a dual-encoder directory, its embeddings, an index
with the dense and hybrid methods, training on questions, and the commands."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tapas_tf.checkpoints import retriever
from tapas_tf.models.dual_encoder import DualEncoderConfig, TableDualEncoder, dummy_retrieval_features
from tapas_tf.retrieval.collection import open_collection
from tapas_tf.retrieval.dense import DenseRetriever
from tapas_tf.retrieval.embedder import load_embedder
from tapas_tf.retrieval.evaluation import evaluate_index
from tapas_tf.retrieval.fusion import reciprocal_rank_fusion
from tapas_tf.retrieval.table_index import (HYBRID_DEPTH, HYBRID_DENSE_WEIGHT, HYBRID_RRF_K, IndexError_, TableIndex,
                                          build_index)
from tapas_tf.retrieval.training_pairs import RetrieverTrainingData, build_training_data
from tapas_tf.training.retriever_training import RetrieverTrainConfig, batch_rows, make_batch, train_retriever
from tests.command_runner import run_command
from tests.model_fixtures import tiny_config
from tests.vocab_fixture import vocab_tokens, write_test_vocab

TABLES = {
    "pylons.csv": "name,height\ntorre,107\ngant,94\n",
    "rivers.csv": "river,length\ndanube,2850\nrhine,1230\n",
    "medals.csv": "nation,gold\nfrance,3\nspain,2\n",
    "cities.csv": "city,population\nparis,2100\nmadrid,3200\n",
}
QUESTIONS = [
    ("q1", "how tall is torre", "pylons.csv"), ("q2", "which pylon is highest", "pylons.csv"),
    ("q3", "how long is the danube", "rivers.csv"), ("q4", "which river is longest", "rivers.csv"),
    ("q5", "how many gold medals did france win", "medals.csv"), ("q6", "which nation won most gold", "medals.csv"),
    ("q7", "what is the population of paris", "cities.csv"), ("q8", "which city is largest", "cities.csv"),
]


def _write_tables(folder):
    for name, text in TABLES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def _write_queries(path, rows):
    path.write_text("id\tquestion\ttable_id\n" + "".join(f"{i}\t{q}\t{t}\n" for i, q, t in rows), encoding="utf-8")


EXTRA_WORDS = ["torre", "gant", "danube", "rhine", "paris"]


def write_tiny_retriever(model_dir, vocab_file, seed: int = 0, **options) -> DualEncoderConfig:
    """A dual-encoder directory with a tiny random model (what import-checkpoint writes)."""
    encoder = tiny_config(reset_position_index_per_cell=False, vocab_size=len(vocab_tokens(EXTRA_WORDS)))
    values = dict(encoder=encoder, projection_dim=8, pooling="mean",
                  normalize=True, share_encoders=True, max_query_length=16, max_table_length=48, logit_scale=10.0)
    values.update(options)
    config = DualEncoderConfig(**values)
    tf.random.set_seed(seed)
    model = TableDualEncoder(config)
    model(dummy_retrieval_features())
    retriever.write_dual_encoder_dir(model, config, str(model_dir), {"format": "test"}, vocab_file)
    return config


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("dense")
    _write_tables(root / "tables")
    vocab = write_test_vocab(root / "vocab.txt", extra_words=EXTRA_WORDS)
    write_tiny_retriever(root / "model", vocab)
    _write_queries(root / "queries.tsv", QUESTIONS)
    return root


def test_the_directory_loads_as_an_embedder_and_embeds_in_any_batch_order(workspace):
    dense = load_embedder(str(workspace / "model"))
    assert isinstance(dense, DenseRetriever)
    assert dense.dimension == 8 and dense.model_id.startswith("dual_encoder-")
    tables = list(open_collection(workspace / "tables"))
    vectors = dense.embed_tables(tables)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    one_by_one = DenseRetriever.from_model_dir(str(workspace / "model"), batch_size=1).embed_tables(tables)
    np.testing.assert_allclose(one_by_one, vectors, atol=1e-5)
    # The same as the model on features built by hand (sorting by length must not mix rows up).
    encoded = dense.table_features(tables[2])
    direct = dense.model.embed_tables({k: tf.constant(v[None]) for k, v in encoded.features.items()})
    np.testing.assert_allclose(vectors[2], direct.numpy()[0], atol=1e-5)
    questions = dense.embed_questions(["how tall is torre", "which river"])
    assert questions.shape == (2, 8)


def test_an_index_with_a_dense_model_offers_dense_and_hybrid(workspace, tmp_path):
    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    report = build_index(open_collection(workspace / "tables"), tmp_path / "index", dense=dense)
    assert report.methods == ["bm25", "dense", "hybrid"] and report.default_method == "hybrid"
    header = json.loads((tmp_path / "index" / "index.json").read_text())
    assert header["dense"]["model_id"] == dense.model_id and header["dense"]["vector_index"] == "exact"
    index = TableIndex.load(tmp_path / "index")
    question = "how long is the danube"
    # Dense: the exact inner products of the question with every table.
    tables = list(open_collection(workspace / "tables"))
    scores = dense.embed_tables(tables) @ dense.embed_questions([question])[0]
    expected = [tables[i].table_id for i in np.argsort(-scores)]
    assert [t for t, _ in index.rankings([question], 4, "dense")[0]] == expected
    # Hybrid: the reciprocal-rank fusion of both rankings, with the fusion the header records.
    assert header["hybrid"] == {"dense_weight": HYBRID_DENSE_WEIGHT, "rrf_k": HYBRID_RRF_K} == index.fusion
    fused = reciprocal_rank_fusion([index.rankings([question], HYBRID_DEPTH, "bm25")[0],
                                    index.rankings([question], HYBRID_DEPTH, "dense")[0]],
                                   k=HYBRID_RRF_K, weights=[1.0, HYBRID_DENSE_WEIGHT], limit=3)
    assert index.rankings([question], 3)[0] == fused
    assert list(index.search(question, k=2)["method"]) == ["hybrid", "hybrid"]
    result = evaluate_index(index, [{"id": "q", "question": question, "table_id": "rivers.csv"}], ks=(1, 2))
    assert set(result["methods"]) == {"bm25", "dense", "hybrid"} and result["default"] == "hybrid"


def test_the_hybrid_fusion_is_chosen_when_indexing_and_kept(workspace, tmp_path):
    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    build_index(open_collection(workspace / "tables"), tmp_path / "index", dense=dense,
                hybrid_dense_weight=0.25, hybrid_rrf_k=5)
    index = TableIndex.load(tmp_path / "index")
    assert index.fusion == {"dense_weight": 0.25, "rrf_k": 5.0}
    question = "which river is longest"
    sparse = index.rankings([question], HYBRID_DEPTH, "bm25")[0]
    dense_ranking = index.rankings([question], HYBRID_DEPTH, "dense")[0]
    # By hand for the first table: 1 / (5 + its BM25 rank) + 0.25 / (5 + its dense rank).
    first, score = index.rankings([question], 1, "hybrid")[0][0]
    ranks = [next(r for r, (t, _) in enumerate(ranking, 1) if t == first) for ranking in (sparse, dense_ranking)]
    assert score == pytest.approx(1 / (5 + ranks[0]) + 0.25 / (5 + ranks[1]))
    # An index written before the fusion was recorded keeps the equal weights it was built with.
    header = json.loads((tmp_path / "index" / "index.json").read_text())
    del header["hybrid"]
    (tmp_path / "index" / "index.json").write_text(json.dumps(header))
    assert TableIndex.load(tmp_path / "index").fusion == {"dense_weight": 1.0, "rrf_k": 60.0}
    with pytest.raises(IndexError_, match="dense weight and k must be > 0"):
        build_index(open_collection(workspace / "tables"), tmp_path / "bad", dense=dense, hybrid_dense_weight=0)


def test_an_index_refuses_another_model_and_a_missing_one(workspace, tmp_path):
    build_index(open_collection(workspace / "tables"), tmp_path / "index",
                dense=DenseRetriever.from_model_dir(str(workspace / "model")))
    other = tmp_path / "other_model"
    write_tiny_retriever(other, str(workspace / "vocab.txt"), seed=5)
    with pytest.raises(IndexError_, match="was embedded by model dual_encoder-"):
        TableIndex.load(tmp_path / "index", dense_model=str(other)).rankings(["danube"], 2, "dense")
    with pytest.raises(IndexError_, match="its dense model cannot be loaded"):
        TableIndex.load(tmp_path / "index", dense_model=str(tmp_path / "nowhere")).rankings(["danube"], 2, "dense")
    # BM25 needs no model.
    assert TableIndex.load(tmp_path / "index", dense_model=str(tmp_path / "nowhere")).rankings(["danube"], 1, "bm25")
    with pytest.raises(IndexError_, match="default method 'dense' is not one of"):
        build_index(open_collection(workspace / "tables"), tmp_path / "bm25_only", default_method="dense")


def test_training_data_reads_only_the_tables_questions_name_and_mines_a_negative(workspace):
    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    queries = [{"id": "a", "question": "torre height or danube length", "table_id": "pylons.csv"},
               {"id": "b", "question": "danube length or torre height", "table_id": "rivers.csv"},
               {"id": "c", "question": "how tall is torre", "table_id": "pylons.csv"},
               {"id": "d", "question": "which river is longest", "table_id": "rivers.csv"},
               {"id": "lost", "question": "where", "table_id": "nowhere.csv"}]
    data = build_training_data(dense.features, [("wtq", open_collection(workspace / "tables"), queries)])
    assert sorted(data.table_ids) == ["wtq:pylons.csv", "wtq:rivers.csv"]  # medals and cities are never read
    assert data.report["questions_kept"] == 4 and data.report["questions_skipped_table_missing"] == 1
    rows = {t: i for i, t in enumerate(data.table_ids)}
    pylons, rivers = rows["wtq:pylons.csv"], rows["wtq:rivers.csv"]
    assert list(data.gold) == [pylons, rivers, pylons, rivers]
    # The other table where BM25 ranks it at all; none where only the question's own table shares a word.
    assert list(data.negative) == [rivers, pylons, -1, -1]
    assert data.report["questions_with_hard_negative"] == 2
    assert data.question_ids.shape == (4, 16)


def test_training_data_round_trips_through_a_file(workspace, tmp_path):
    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    queries = [{"id": i, "question": q, "table_id": t} for i, q, t in QUESTIONS]
    data = build_training_data(dense.features, [("s0", open_collection(workspace / "tables"), queries)])
    data.save(str(tmp_path / "data.npz"))
    again = RetrieverTrainingData.load(str(tmp_path / "data.npz"))
    np.testing.assert_array_equal(again.tables["row_ids"], data.tables["row_ids"])
    assert list(again.table_ids) == list(data.table_ids) and again.report == data.report
    (tmp_path / "bad.npz").write_bytes(b"not an npz")
    with pytest.raises(ValueError, match="is not retriever training data"):
        RetrieverTrainingData.load(str(tmp_path / "bad.npz"))


def test_batches_cover_each_epoch_once_and_put_gold_tables_first(workspace):
    rows = [batch_rows(8, 4, step, seed=3) for step in range(2)]
    assert sorted(np.concatenate(rows)) == list(range(8))
    np.testing.assert_array_equal(batch_rows(8, 4, 1, seed=3), rows[1])  # A resumed run draws the same.
    with pytest.raises(ValueError, match="larger than the 8 training questions"):
        batch_rows(8, 9, 0, seed=1)
    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    queries = [{"id": i, "question": q, "table_id": t} for i, q, t in QUESTIONS]
    data = build_training_data(dense.features, [("s0", open_collection(workspace / "tables"), queries)])
    batch = make_batch(data, np.array([0, 2]), np.random.default_rng(0))
    assert list(batch["table_rows"][:2]) == [data.gold[0], data.gold[2]]
    for row, table in zip([0, 2], batch["table_rows"][2:]):
        # The hard negative, or a random table for a question without one.
        assert table == data.negative[row] if data.negative[row] >= 0 else 0 <= table < len(data.table_ids)
    assert batch["input_ids"].shape[0] == 4 and batch["question_input_ids"].shape[0] == 2


def test_training_puts_each_question_on_its_table_and_resumes(workspace, tmp_path):
    """A tiny retriever trained on eight questions ranks each question's table first."""
    model_dir = tmp_path / "trained"
    model_dir.mkdir()
    for name in (retriever.CONFIG_FILE, "vocab.txt"):
        (model_dir / name).write_bytes((workspace / "model" / name).read_bytes())
    model, config = retriever.load_dual_encoder(str(workspace / "model"))
    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    queries = [{"id": i, "question": q, "table_id": t} for i, q, t in QUESTIONS]
    data = build_training_data(dense.features, [("s0", open_collection(workspace / "tables"), queries)])
    settings = dict(train_steps=100, batch_size=4, learning_rate=1e-3, warmup_ratio=0.0, save_checkpoints_steps=50,
                    log_steps=50)
    first = train_retriever(model, config, data, RetrieverTrainConfig(**settings), str(model_dir),
                            stop_at=50)
    assert first.step == 50 and os.path.basename(first.checkpoint) == "ckpt-50"
    again, _ = retriever.load_dual_encoder(str(model_dir))
    result = train_retriever(again, config, data, RetrieverTrainConfig(**settings), str(model_dir))
    assert result.step == 100 and result.metrics["in_batch_accuracy"] == 1.0
    scores = (again.embed_queries(tf.constant(data.question_ids), tf.constant(data.question_mask)).numpy()
              @ again.embed_tables({k: tf.constant(v) for k, v in data.tables.items()}).numpy().T)
    assert list(scores.argmax(axis=1)) == list(data.gold)


def test_init_train_index_and_evaluate_through_the_commands(workspace, tmp_path):
    model_dir = tmp_path / "trained"
    run = run_command("train-retriever", f"--init_model={workspace / 'model'}", f"--model_dir={model_dir}",
                      f"--tables={workspace / 'tables'}", f"--queries={workspace / 'queries.tsv'}",
                      "--train_steps=100", "--batch_size=4", "--learning_rate=1e-3", "--warmup_ratio=0",
                      "--log_steps=20", "--precision=float32")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["step"] == 100 and summary["questions"] == 8
    record = json.loads((model_dir / "embedder.json").read_text())
    assert record["checkpoint"] == "checkpoints/ckpt-100" and record["kind"] == "dual_encoder"
    run = run_command("index", f"--tables={workspace / 'tables'}", f"--index_dir={tmp_path / 'index'}",
                      f"--dense_model={model_dir}", "--noprogress_bar", "--json", "--hybrid_dense_weight=0.5")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["methods"] == ["bm25", "dense", "hybrid"]
    header = json.loads((tmp_path / "index" / "index.json").read_text())
    assert header["hybrid"] == {"dense_weight": 0.5, "rrf_k": HYBRID_RRF_K}
    run = run_command("evaluate-retrieval", f"--index_dir={tmp_path / 'index'}", f"--queries={workspace / 'queries.tsv'}")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["methods"]["dense"]["recall@1"] == 1.0  # Its own training questions.
    run = run_command("train-retriever", f"--model_dir={tmp_path / 'new'}", f"--tables={workspace / 'tables'}",
                      f"--queries={workspace / 'queries.tsv'}")
    assert run.returncode != 0 and "give --init_model" in run.stderr
    run = run_command("train-retriever", f"--model_dir={tmp_path / 'new'}", f"--tables={workspace / 'tables'}")
    assert run.returncode != 0 and "1 --tables but 0 --queries" in run.stderr


def test_an_index_reads_the_beam_jobs_shards_and_embeds_only_what_they_lack(workspace, tmp_path):
    from tapas_tf.retrieval.embedding_shards import write_embedding_shards

    dense = DenseRetriever.from_model_dir(str(workspace / "model"))
    tables = list(open_collection(workspace / "tables"))
    vectors = dense.embed_tables(tables)
    # The shards hold three of the four tables, one with a marked vector to see it is used as given.
    marked = vectors.copy()
    marked[0] = np.eye(8, dtype=np.float32)[3]
    write_embedding_shards(str(tmp_path / "shards"), [t.table_id for t in tables[:3]], [t.title for t in tables[:3]],
                           marked[:3], dense.model_id, num_shards=2)
    build_index(open_collection(workspace / "tables"), tmp_path / "index", dense=dense,
                embeddings_dir=str(tmp_path / "shards"))
    header = json.loads((tmp_path / "index" / "index.json").read_text())
    assert (header["dense"]["from_shards"], header["dense"]["embedded_here"]) == (3, 1)
    index = TableIndex.load(tmp_path / "index")
    np.testing.assert_allclose(index._vectors.search(np.eye(8, dtype=np.float32)[3:4], 1)[0][0][1], 1.0, atol=1e-6)
    assert index._vectors.search(np.eye(8, dtype=np.float32)[3:4], 1)[0][0][0] == tables[0].table_id
    # Shards of another model are refused.
    write_embedding_shards(str(tmp_path / "other"), [tables[0].table_id], [""], vectors[:1], "another-model")
    with pytest.raises(IndexError_, match="another-model|model"):
        build_index(open_collection(workspace / "tables"), tmp_path / "index2", dense=dense,
                    embeddings_dir=str(tmp_path / "other"))
