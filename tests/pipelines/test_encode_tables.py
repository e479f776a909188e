"""The encoding job end to end on the in-process runner, with a deterministic fake embedder.

`BagOfWordsEmbedder` hashes the words of a table (title, header, cells) into 16 dimensions and
normalises them; it raises for any batch holding the word "explode", as a model might for one
table it cannot read. One module-scoped run encodes a folder of six files (three tables, one that
makes the embedder raise, an empty and a binary file); the tests check the counters and the report,
the failures file, the shards read back against the embedder's own output, and an index built
from them. Interaction files (repeated, conflicting and id-less tables, a truncated file), the
command line and the errors of a bad model directory have their own runs.
"""

import json
import os
import re
import zlib

import numpy as np
import pytest

from tapas_tf.beam_jobs import encode_tables as job
from tapas_tf.data import interaction_io
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.pipelines import encode_tables as transforms
from tapas_tf.retrieval import embedding_shards, collection_encoding
from tapas_tf.retrieval.collection import open_collection
from tapas_tf.retrieval.embedder import EMBEDDER_FILE, register_embedder
from tests.command_runner import run_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KIND = "test_bag_of_words"
DIM = 16
FAIL_WORD = "explode"
BEAM_ARGS = ["--direct_num_workers=1"]


def _words(table) -> list:
    text = " ".join([table.title, *map(str, table.frame.columns),
                     *(str(cell) for row in table.frame.to_numpy(dtype=object).tolist() for cell in row)])
    return re.findall(r"\w+", text.lower())


def bag_vector(table) -> np.ndarray:
    """float32 [DIM]: the table's words hashed into DIM buckets, normalised."""
    vector = np.zeros(DIM, np.float32)
    for word in _words(table):
        vector[zlib.crc32(word.encode("utf-8")) % DIM] += 1.0
    return vector / max(float(np.linalg.norm(vector)), 1e-6)


class BagOfWordsEmbedder:
    """The TableEmbedder protocol, deterministic and picklable."""

    dimension = DIM

    def __init__(self, model_id: str = "bag-of-words-16"):
        self.model_id = model_id

    def embed_tables(self, tables) -> np.ndarray:
        if any(FAIL_WORD in _words(t) for t in tables):
            raise RuntimeError(f"the model cannot read {FAIL_WORD!r}")
        return np.stack([bag_vector(t) for t in tables])


def make_bag_of_words(model_dir: str, config: dict) -> BagOfWordsEmbedder:
    return BagOfWordsEmbedder(config.get("model_id", "bag-of-words-16"))


register_embedder(KIND, make_bag_of_words)


def write_model_dir(path, **config) -> str:
    path.mkdir(parents=True, exist_ok=True)
    # "module": so that a fresh process (the command line's) registers the kind too.
    (path / EMBEDDER_FILE).write_text(json.dumps({"kind": KIND, "module": __name__, **config}))
    return str(path)


TABLES = {
    "cities.csv": "City,Country\nParis,France\nBerlin,Germany\n",
    "rivers.csv": "River,Length\nNile,6650\nAmazon,6400\n",
    "peaks/mountains.tsv": "Mountain\tHeight\nEverest\t8849\nK2\t8611\n",
    "boom.csv": "Word\nexplode\n",
}


def write_collection(folder) -> str:
    for name, text in TABLES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "empty.csv").write_text("")
    (folder / "blob.csv").write_bytes(b"\x00\x01\x02\xff binary")
    (folder / "notes.txt").write_text("not a table")
    return str(folder)


def read_failures(out) -> list:
    lines = (out / "failures.tsv").read_text().splitlines()
    assert lines[0] == "\t".join(transforms.FAILURE_COLUMNS)
    return sorted((transforms.parse_failure_line(line) for line in lines[1:]), key=lambda r: r["source"])


@pytest.fixture(scope="module")
def collection_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("encode")
    folder = write_collection(base / "tables")
    model_dir = write_model_dir(base / "model")
    out = base / "out"
    encoder = collection_encoding.TableEncoder.from_model_dir(model_dir)
    report = job.run(job.EncodeJob(str(out), batch_size=8, num_shards=2),
                     collection_encoding.CollectionSource(folder), encoder, BEAM_ARGS)
    return report, out, folder


def test_every_table_is_counted(collection_run):
    report, out, _ = collection_run
    counters = report["counters"]
    assert counters["tables_listed"] == 6
    assert counters["tables_seen"] == 6 and counters["tables_read"] == 4
    assert counters["tables_encoded"] == 3 and counters["tables_embedded"] == 3
    assert counters["tables_skipped_empty"] == 1 and counters["tables_skipped_binary"] == 1
    assert counters["tables_skipped_embedding_failed"] == 1
    # The four tables made one batch, which failed for boom.csv and was embedded table by table.
    assert counters["embedding_batches"] == 1 and counters["embedding_batches_retried"] == 1
    tables = report["tables"]
    assert tables["skipped_by_reason"] == {"binary": 1, "empty": 1, "embedding_failed": 1}
    assert tables["adds_up"] and tables["repeated"] == 0 and not tables["files_failed"]
    assert json.loads((out / job.REPORT_FILE).read_text())["tables"] == tables
    line = job.summary_line(report)
    assert line.startswith(f"embedded 3 of 6 tables -> {out} (2 shards, model bag-of-words-16, d 16)")
    assert '"embedding_failed": 1' in line and "failures.tsv" in line


def test_the_failures_file_names_each_table_not_embedded(collection_run):
    _, out, folder = collection_run
    rows = read_failures(out)
    assert [(os.path.relpath(r["source"], folder), r["reason"], r["lost"]) for r in rows] == [
        ("blob.csv", "binary", "table"), ("boom.csv", "embedding_failed", "table"), ("empty.csv", "empty", "table")]
    boom = rows[1]
    assert boom["table_id"] == "boom.csv" and "RuntimeError" in boom["message"] and FAIL_WORD in boom["message"]


def test_the_shards_hold_the_embedders_vectors(collection_run):
    _, out, folder = collection_run
    ids, vectors, metadata = embedding_shards.read_embedding_shards(str(out))
    expected = {t.table_id: bag_vector(t) for t in open_collection(folder) if t.table_id != "boom.csv"}
    assert sorted(ids) == sorted(expected) == ["cities.csv", "peaks/mountains.tsv", "rivers.csv"]
    for table_id, vector in zip(ids, vectors):
        np.testing.assert_array_equal(vector, expected[table_id])
    assert metadata["model_id"] == "bag-of-words-16" and metadata["dimension"] == DIM and metadata["count"] == 3
    assert metadata["format_version"] == embedding_shards.FORMAT_VERSION
    assert metadata["shards"] == ["embeddings-00000-of-00002.tfrecord", "embeddings-00001-of-00002.tfrecord"]
    assert metadata["skipped_by_reason"] == {"binary": 1, "empty": 1, "embedding_failed": 1}
    assert metadata["inputs"]["tables"] == folder
    titles = {table_id: title for table_id, title, _ in embedding_shards.read_embedding_records(str(out))}
    assert titles == {"cities.csv": "cities", "rivers.csv": "rivers", "peaks/mountains.tsv": "mountains"}


def test_an_index_built_from_the_shards_finds_the_nearest_table(collection_run, tmp_path):
    _, out, folder = collection_run
    index = embedding_shards.build_vector_index_from_shards(str(out), index_dir=str(tmp_path / "dense"))
    rivers = next(t for t in open_collection(folder) if t.table_id == "rivers.csv")
    (hits,) = index.search(bag_vector(rivers)[None], k=3)
    assert hits[0][0] == "rivers.csv" and hits[0][1] == pytest.approx(1.0)
    assert json.loads((tmp_path / "dense" / embedding_shards.EMBEDDING_MODEL_FILE).read_text())["model_id"] == \
        "bag-of-words-16"


def test_a_rerun_replaces_the_metadata_and_the_reader_ignores_stale_shards(collection_run, tmp_path):
    """Another shard count writes other file names; embeddings.json lists only this run's."""
    folder = collection_run[2]
    model_dir = write_model_dir(tmp_path / "model")
    rerun = tmp_path / "out"
    encoder = collection_encoding.TableEncoder.from_model_dir(model_dir)
    for shards in (3, 1):
        report = job.run(job.EncodeJob(str(rerun), batch_size=2, num_shards=shards),
                         collection_encoding.CollectionSource(folder), encoder, BEAM_ARGS)
    assert report["tables"]["adds_up"] and report["metadata"]["shards"] == ["embeddings-00000-of-00001.tfrecord"]
    assert len(list(rerun.glob("embeddings-*-of-00003.tfrecord"))) == 3  # Left as they were, and not read.
    ids, _, _ = embedding_shards.read_embedding_shards(str(rerun))
    assert sorted(ids) == ["cities.csv", "peaks/mountains.tsv", "rivers.csv"]


# --- the per-table steps, without Beam --------------------------------------------------------------


def test_a_failing_batch_is_retried_table_by_table(tmp_path):
    tables = list(open_collection(write_collection(tmp_path / "tables")))
    outcome = collection_encoding.embed_batch(BagOfWordsEmbedder(), tables)
    assert outcome.retried
    assert [e.table_id for e in outcome.embedded] == ["cities.csv", "peaks/mountains.tsv", "rivers.csv"]
    assert [(s.table_id, s.reason) for s in outcome.skipped] == [("boom.csv", "embedding_failed")]
    good = [t for t in tables if t.table_id != "boom.csv"]
    outcome = collection_encoding.embed_batch(BagOfWordsEmbedder(), good)
    assert not outcome.retried and not outcome.skipped
    _, _, values = embedding_shards.decode_example(outcome.embedded[0].record)
    np.testing.assert_array_equal(np.asarray(values, np.float32), bag_vector(good[0]))


class _WrongShapeEmbedder(BagOfWordsEmbedder):
    def embed_tables(self, tables):
        vectors = super().embed_tables(tables)
        vectors[0, 0] = np.nan
        return vectors[:, :8] if len(tables) > 1 else vectors


def test_a_wrong_shape_is_retried_and_a_nan_vector_is_skipped(tmp_path):
    tables = [t for t in open_collection(write_collection(tmp_path / "tables")) if t.table_id != "boom.csv"]
    outcome = collection_encoding.embed_batch(_WrongShapeEmbedder(), tables)
    assert outcome.retried and not outcome.embedded  # Alone, every table's vector has a NaN.
    assert {s.reason for s in outcome.skipped} == {"embedding_not_finite"}


def test_keep_one_is_the_same_whatever_the_order():
    candidates = [("b", "x.tfrecord#2", b"B"), ("a", "x.tfrecord#1", b"A"), ("a", "y.tfrecord#1", b"A2")]
    for order in (candidates, candidates[::-1]):
        record, repeated, rows = transforms.keep_one("t", order)
        assert (record, repeated) == (b"A", 1)
        assert [(r[1], r[2]) for r in rows] == [("x.tfrecord#2", "duplicate_table_id")]


# --- interaction files -----------------------------------------------------------------------------


def _interaction(interaction_id, table_id, title, header, rows):
    interaction = interaction_pb2.Interaction(id=interaction_id)
    interaction.table.table_id = table_id
    interaction.table.document_title = title
    for name in header:
        interaction.table.columns.add(text=name)
    for row in rows:
        interaction.table.rows.add().cells.extend(interaction_pb2.Cell(text=cell) for cell in row)
    return interaction


def test_interactions_are_encoded_once_per_table_id(tmp_path):
    medals = _interaction("q1", "wiki/Games_0", "Winter games", ["Nation", "Gold"], [["Norway", "4"]])
    again = _interaction("q2", "wiki/Games_0", "Winter games", ["Nation", "Gold"], [["Norway", "4"]])
    rivers = _interaction("q3", "wiki/Rivers_0", "Rivers", ["River", "Length"], [["Glomma", "621"], ["Dal"]])
    other = _interaction("q4", "wiki/Rivers_0", "Rivers", ["River", "Length"], [["Rhine", "1233"]])
    no_id = _interaction("q5", "", "Lakes", ["Lake"], [["Mjøsa"]])
    interaction_io.write_interactions(str(tmp_path / "in" / "a.tfrecord"), [medals, rivers, no_id])
    interaction_io.write_interactions(str(tmp_path / "in" / "b.tfrecord"), [again, other])
    encoder = collection_encoding.TableEncoder.from_model_dir(write_model_dir(tmp_path / "model"))
    source = collection_encoding.InteractionSource([str(tmp_path / "in" / "*.tfrecord")])
    report = job.run(job.EncodeJob(str(tmp_path / "out")), source, encoder, BEAM_ARGS)
    counters = report["counters"]
    assert counters["interaction_files_listed"] == 2 and counters["tables_seen"] == 5
    assert counters["tables_embedded"] == 2 and counters["tables_repeated"] == 1
    assert report["tables"]["skipped_by_reason"] == {"duplicate_table_id": 1, "no_table_id": 1}
    assert report["tables"]["adds_up"]
    ids, vectors, _ = embedding_shards.read_embedding_shards(str(tmp_path / "out"))
    assert sorted(ids) == ["wiki/Games_0", "wiki/Rivers_0"]
    titles = {t: title for t, title, _ in embedding_shards.read_embedding_records(str(tmp_path / "out"))}
    assert titles == {"wiki/Games_0": "Winter games", "wiki/Rivers_0": "Rivers"}
    tables = {}
    for interaction, path in ((medals, "a"), (rivers, "a"), (other, "b")):
        table, _ = collection_encoding.table_from_interaction(interaction, path)
        tables.setdefault(table.table_id, []).append(table)
    # Of the two Rivers_0 tables, the one with the lower fingerprint is kept, whatever the order.
    kept = min(tables["wiki/Rivers_0"], key=collection_encoding.table_fingerprint)
    np.testing.assert_array_equal(vectors[ids.index("wiki/Rivers_0")], bag_vector(kept))
    np.testing.assert_array_equal(vectors[ids.index("wiki/Games_0")], bag_vector(tables["wiki/Games_0"][0]))
    reasons = {r["reason"]: r for r in read_failures(tmp_path / "out")}
    assert reasons["no_table_id"]["source"].endswith("a.tfrecord#q5")
    assert "wiki/Rivers_0" == reasons["duplicate_table_id"]["table_id"]


def test_an_interaction_table_reads_as_a_collection_table():
    rivers = _interaction("q3", "wiki/Rivers_0", "Rivers", ["River", "Length"], [["Glomma", "621"], ["Dal"]])
    table, skip = collection_encoding.table_from_interaction(rivers, "f.tfrecord", max_rows=1)
    assert skip is None and (table.table_id, table.title, table.source) == ("wiki/Rivers_0", "Rivers", "f.tfrecord#q3")
    assert table.frame.values.tolist() == [["Glomma", "621"]] and table.rows_truncated and table.rows_total == 2
    wide = _interaction("q", "t", "T", ["A"], [["1", "2"]])
    assert collection_encoding.table_from_interaction(wide, "f")[1].reason == "bad_table"


def test_a_truncated_interaction_file_is_a_file_failure(tmp_path):
    path = tmp_path / "in" / "cut.tfrecord"
    interaction_io.write_interactions(str(path), [
        _interaction(f"q{i}", f"t{i}", "T", ["A"], [[f"word{i}"]]) for i in range(3)])
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 5])
    encoder = collection_encoding.TableEncoder.from_model_dir(write_model_dir(tmp_path / "model"))
    report = job.run(job.EncodeJob(str(tmp_path / "out")), collection_encoding.InteractionSource([str(path)]),
                     encoder, BEAM_ARGS)
    assert report["counters"]["tables_embedded"] == 2
    assert report["tables"]["files_failed"] == {"truncated_record": 1} and not report["tables"]["adds_up"]
    (failure,) = report["file_failures"]
    assert failure["source"] == str(path) and failure["lost"] == "file" and "record 3" in failure["message"]


# --- errors and the command line ---------------------------------------------------------------------


def test_a_bad_model_directory_fails_before_the_job(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path / 'none'}: no such model directory"):
        collection_encoding.TableEncoder.from_model_dir(str(tmp_path / "none"))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / EMBEDDER_FILE).write_text('{"kind": "no_such_kind"}')
    with pytest.raises(ValueError, match=r"embedder.json: unknown embedder kind 'no_such_kind'; kinds registered: "
                                         rf".*{KIND}"):
        collection_encoding.TableEncoder.from_model_dir(str(tmp_path / "model"))


def test_a_worker_refuses_a_model_that_changed(tmp_path):
    model_dir = write_model_dir(tmp_path / "model")
    encoder = collection_encoding.TableEncoder.from_model_dir(model_dir)
    write_model_dir(tmp_path / "model", model_id="retrained")
    import pickle

    with pytest.raises(ValueError, match="the model changed while the job ran"):
        pickle.loads(pickle.dumps(encoder)).load()  # What a worker gets: no model, loaded again.


def test_the_command_line(tmp_path):
    folder = write_collection(tmp_path / "tables")
    model_dir = write_model_dir(tmp_path / "model")
    out = tmp_path / "out"
    result = run_command("encode-tables", f"--tables={folder}", f"--model_dir={model_dir}", f"--output_dir={out}",
                         "--batch_size=2", "--noprogress_bar", "--direct_num_workers=1", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1].startswith(f"embedded 3 of 6 tables -> {out}")
    assert (out / "embeddings.json").exists() and (out / job.REPORT_FILE).exists()
    result = run_command("encode-tables", f"--tables={folder}", f"--interactions={folder}/*.tfrecord",
                         f"--model_dir={model_dir}", f"--output_dir={out}", cwd=ROOT)
    assert result.returncode == 2 and "give one input" in result.stderr
    result = run_command("encode-tables", f"--tables={tmp_path / 'missing'}", f"--model_dir={model_dir}",
                         f"--output_dir={out}", cwd=ROOT)
    assert result.returncode == 1 and f"{tmp_path / 'missing'}: no such file or directory" in result.stderr


def test_dataflow_dry_run_translates_the_job_graph(tmp_path):
    """The graph of a Dataflow job: the source and encoder pickle, nothing is read from gs://."""
    folder = write_collection(tmp_path / "tables")
    encoder = collection_encoding.TableEncoder.from_model_dir(write_model_dir(tmp_path / "model"))
    wheel = tmp_path / "tapas_tf-0-py3-none-any.whl"
    wheel.write_bytes(b"")  # Given, so the job stages it instead of building its own wheel.
    report = job.run(job.EncodeJob("gs://tapas-test-bucket/embeddings", num_shards=256),
                     collection_encoding.CollectionSource(folder), encoder,
                     ["--runner=DataflowRunner", "--project=tapas-test", "--region=us-central1",
                      "--temp_location=gs://tapas-test-bucket/tmp", "--dry_run=True", f"--extra_package={wheel}"])
    assert report["dry_run"] is True and report["extra_packages"] == [str(wheel)]
    names = {t.unique_name for t in report["job"].proto_pipeline.components.transforms.values()}
    assert {"ReadTables/ListKeys", "EmbedTables/Embed", "OnePerTable/KeepOne", "WriteEmbeddings/WriteShards",
            "WriteEmbeddings/WriteMetadata", "WriteFailures/Concatenate"} <= names
