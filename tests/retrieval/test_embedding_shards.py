"""Embedding shards: written and read back without TensorFlow, readable by TensorFlow, refused when
they are not what embeddings.json says, and turned into a vector index."""

import json

import numpy as np
import pytest

from tapas_tf.retrieval import embedding_shards as shards
from tapas_tf.retrieval.embedding_shards import EmbeddingShardError
from tapas_tf.retrieval.vector_index import VectorIndex

DIM = 16


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _write(directory, n: int = 10, num_shards: int = 3, ids=None, **kwargs):
    ids = ids or [f"table/{i}.csv" for i in range(n)]
    vectors = _vectors(len(ids))
    metadata = shards.write_embedding_shards(str(directory), ids, [f"Title {i}" for i in range(len(ids))], vectors,
                                             "model-abc", num_shards=num_shards, **kwargs)
    return ids, vectors, metadata


def _edit_metadata(directory, **changes):
    path = directory / shards.METADATA_FILE
    metadata = json.loads(path.read_text())
    metadata.update(changes)
    path.write_text(json.dumps(metadata))
    return str(path)


def test_shards_read_back_in_order(tmp_path):
    ids, vectors, written = _write(tmp_path, skipped_by_reason={"empty": 2})
    read_ids, read_vectors, metadata = shards.read_embedding_shards(str(tmp_path))
    assert read_ids == ids and read_vectors.dtype == np.float32 and read_vectors.shape == (10, DIM)
    np.testing.assert_array_equal(read_vectors, vectors)
    assert metadata == written
    assert metadata["shards"] == [shards.shard_name(i, 3) for i in range(3)]
    assert metadata["count"] == 10 and metadata["skipped_by_reason"] == {"empty": 2}
    titles = [title for _, title, _ in shards.read_embedding_records(str(tmp_path))]
    assert titles == [f"Title {i}" for i in range(10)]
    shards.read_embedding_shards(str(tmp_path), dimension=DIM, model_id="model-abc")


def test_tensorflow_reads_the_shards_as_examples(tmp_path):
    import tensorflow as tf

    ids, vectors, metadata = _write(tmp_path, n=4, num_shards=1)
    records = list(tf.data.TFRecordDataset(str(tmp_path / metadata["shards"][0])).as_numpy_iterator())
    spec = {"table_id": tf.io.FixedLenFeature([], tf.string), "title": tf.io.FixedLenFeature([], tf.string),
            "embedding": tf.io.FixedLenFeature([DIM], tf.float32)}
    parsed = [tf.io.parse_single_example(r, spec) for r in records]
    assert [p["table_id"].numpy().decode() for p in parsed] == ids
    np.testing.assert_array_equal(np.stack([p["embedding"].numpy() for p in parsed]), vectors)


def test_reading_needs_no_tensorflow(tmp_path):
    import subprocess
    import sys

    _write(tmp_path, n=3, num_shards=2)
    code = ("import sys; from tapas_tf.retrieval.embedding_shards import read_embedding_shards as r; "
            f"ids, v, _ = r({str(tmp_path)!r}); print(len(ids), v.shape, 'tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["3", "(3,", "16)", "False"]


def test_an_index_is_built_from_the_shards(tmp_path):
    ids, vectors, _ = _write(tmp_path / "shards", n=50)
    index = shards.build_vector_index_from_shards(str(tmp_path / "shards"), index_dir=str(tmp_path / "dense"))
    assert index.kind == "exact" and index.count == 50 and index.dim == DIM
    query = vectors[17] + 0.01 * _vectors(1, seed=5)[0]
    assert index.search(query[None], k=1)[0][0][0] == ids[17]
    loaded = VectorIndex.load(str(tmp_path / "dense"))
    assert loaded.search(query[None], k=1)[0][0][0] == ids[17]
    model = json.loads((tmp_path / "dense" / shards.EMBEDDING_MODEL_FILE).read_text())
    assert model["model_id"] == "model-abc" and model["dimension"] == DIM and model["count"] == 50


def test_no_embeddings_is_no_index(tmp_path):
    shards.write_embedding_shards(str(tmp_path), [], [], np.zeros((0, DIM)), "m")
    ids, vectors, _ = shards.read_embedding_shards(str(tmp_path))
    assert ids == [] and vectors.shape == (0, DIM)
    with pytest.raises(EmbeddingShardError, match=r"embeddings.json: no embeddings \(count 0\)"):
        shards.build_vector_index_from_shards(str(tmp_path))


# --- what is refused ----------------------------------------------------------------------------------


def test_another_format_version_is_refused_naming_the_file(tmp_path):
    _write(tmp_path)
    path = _edit_metadata(tmp_path, format_version=2)
    with pytest.raises(EmbeddingShardError, match=f"{path} has format_version 2; this tapas-tf reads version 1"):
        shards.read_embedding_shards(str(tmp_path))


def test_a_missing_or_broken_metadata_file_is_refused(tmp_path):
    with pytest.raises(EmbeddingShardError, match=r"embeddings.json is missing: .* not a complete"):
        shards.read_embedding_shards(str(tmp_path))
    _write(tmp_path)
    (tmp_path / shards.METADATA_FILE).write_text("{not json")
    with pytest.raises(EmbeddingShardError, match="embeddings.json is not valid JSON"):
        shards.read_embedding_shards(str(tmp_path))
    (tmp_path / shards.METADATA_FILE).write_text("[]")
    with pytest.raises(EmbeddingShardError, match="does not hold a JSON object"):
        shards.read_embedding_shards(str(tmp_path))


def test_a_dimension_mismatch_is_refused(tmp_path):
    _write(tmp_path)
    with pytest.raises(EmbeddingShardError, match="vectors of dimension 16, not 32"):
        shards.read_embedding_shards(str(tmp_path), dimension=32)
    with pytest.raises(EmbeddingShardError, match="embedded by model 'model-abc', not 'other'"):
        shards.build_vector_index_from_shards(str(tmp_path), model_id="other")
    path = _edit_metadata(tmp_path, dimension=8)
    with pytest.raises(EmbeddingShardError, match=rf"embeddings-00000-of-00003.tfrecord: record 1 \('table/0.csv'\) "
                                                  rf"has an embedding of 16 values; {path} says dimension 8"):
        shards.read_embedding_shards(str(tmp_path))
    _edit_metadata(tmp_path, dimension=0)
    with pytest.raises(EmbeddingShardError, match="dimension must be a positive integer, got 0"):
        shards.read_embedding_shards(str(tmp_path))


def test_duplicate_table_ids_are_refused_naming_both_records(tmp_path):
    ids = [f"t{i}" for i in range(6)]
    ids[4] = "t1"
    _write(tmp_path, ids=ids, num_shards=2)
    with pytest.raises(EmbeddingShardError, match=r"embeddings-00001-of-00002.tfrecord: record 2: table id 't1' "
                                                  r"again \(first in .*embeddings-00000-of-00002.tfrecord: record 2\)"):
        shards.read_embedding_shards(str(tmp_path))


def test_a_count_that_differs_from_the_records_is_refused(tmp_path):
    _write(tmp_path)
    _edit_metadata(tmp_path, count=11)
    with pytest.raises(EmbeddingShardError, match="the shards hold 10 records but .* says count 11"):
        shards.read_embedding_shards(str(tmp_path))
    _edit_metadata(tmp_path, count=9)
    with pytest.raises(EmbeddingShardError, match="record 4: more records than the count 9"):
        shards.read_embedding_shards(str(tmp_path))


def test_a_missing_damaged_or_cut_shard_is_refused(tmp_path):
    _, _, metadata = _write(tmp_path)
    first = tmp_path / metadata["shards"][0]
    data = first.read_bytes()
    first.write_bytes(data[:-3])
    with pytest.raises(EmbeddingShardError, match=rf"{first}: record 3 at byte \d+ is cut short"):
        shards.read_embedding_shards(str(tmp_path))
    damaged = bytearray(data)
    damaged[20] ^= 0xFF  # Inside the first record's data.
    first.write_bytes(bytes(damaged))
    with pytest.raises(EmbeddingShardError, match=rf"{first}: record 1 at byte 0: the data's CRC does not match"):
        shards.read_embedding_shards(str(tmp_path))
    first.unlink()
    with pytest.raises(EmbeddingShardError, match=f"{first} is missing; .*embeddings.json lists it"):
        shards.read_embedding_shards(str(tmp_path))


def test_a_record_that_is_not_an_embedding_example_is_refused(tmp_path):
    path = tmp_path / shards.shard_name(0, 1)
    with open(path, "wb") as f:
        shards.write_tfrecords(f, [b"\x08\x96\x01", shards.encode_example("a", "A", np.zeros(DIM))])
    shards.write_metadata(str(tmp_path), shards.shard_metadata("m", DIM, 2, [path.name]))
    with pytest.raises(EmbeddingShardError, match=rf"{path}: record 1: "):
        shards.read_embedding_shards(str(tmp_path))
