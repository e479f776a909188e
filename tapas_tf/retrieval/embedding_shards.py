"""Embedding shards: the tables' vectors as the encoding job writes them, and the index built from them.

    ids, vectors, metadata = read_embedding_shards("out/embeddings")   # vectors: float32 [n, d]
    index = build_vector_index_from_shards("out/embeddings", index_dir="my_index/dense")

A shards directory (`tapas-tf encode-tables --output_dir`, or `write_embedding_shards`) holds

- `embeddings-SSSSS-of-NNNNN.tfrecord`: TFRecord files of `tf.train.Example`s, one per table, with
  the features `table_id` (bytes, UTF-8), `title` (bytes, UTF-8) and `embedding` (float list of
  `dimension` values); in no particular order;
- `embeddings.json`, written last: `format_version` (FORMAT_VERSION), `model_id` (the embedder's
  fingerprint), `dimension`, `count` (records in all shards), `shard_pattern`, `shards` (the file
  names, in the order they are read) and `skipped_by_reason` (tables of the input not embedded).

Reading needs neither TensorFlow nor Beam for a local directory: the TFRecord framing (length,
masked CRC-32C of the length, data, masked CRC-32C of the data) is read here and checked with
google-crc32c, and the Example with protobuf message classes built from the same field numbers as
TensorFlow's `example.proto` (in a descriptor pool of their own, so they never clash with
TensorFlow's when both are loaded). The count in embeddings.json lets the reader fill one
preallocated [count, dimension] array: at the Wikipedia job's six million tables and d 256 that is
6.1 GB, where a list of per-record arrays grown and stacked would need twice that. A `gs://`
directory is read through Beam's file systems.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from typing import Any, BinaryIO, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    "EMBEDDING_MODEL_FILE",
    "FORMAT_VERSION",
    "METADATA_FILE",
    "SHARD_PATTERN",
    "SHARD_PREFIX",
    "SHARD_SUFFIX",
    "EmbeddingShardError",
    "build_vector_index_from_shards",
    "decode_example",
    "encode_example",
    "read_embedding_records",
    "read_embedding_shards",
    "read_metadata",
    "read_tfrecords",
    "shard_metadata",
    "shard_name",
    "write_embedding_shards",
    "write_metadata",
    "write_tfrecords",
]

FORMAT_VERSION = 1
METADATA_FILE = "embeddings.json"
SHARD_PREFIX = "embeddings"  # Shards are SHARD_PREFIX-SSSSS-of-NNNNN SHARD_SUFFIX.
SHARD_SUFFIX = ".tfrecord"
SHARD_PATTERN = f"{SHARD_PREFIX}-*-of-*{SHARD_SUFFIX}"
# Beside a VectorIndex built from shards: which model embedded its vectors (the question encoder
# must be the same model).
EMBEDDING_MODEL_FILE = "embedding_model.json"
TABLE_ID, TITLE, EMBEDDING = "table_id", "title", "embedding"
RECORD_FORMAT = ("tf.train.Example {table_id: bytes_list [1], title: bytes_list [1], "
                 "embedding: float_list [dimension]}")

_HEADER = struct.Struct("<QI")  # Record length, masked CRC-32C of the length's 8 bytes.
_FOOTER = struct.Struct("<I")  # Masked CRC-32C of the data.
_CRC_MASK_DELTA = 0xA282EAD8


class EmbeddingShardError(ValueError):
    """A shards directory, metadata file or shard that cannot be read as written; the message names the file."""


# --- the TFRecord framing ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _crc32c():
    try:
        import google_crc32c  # Installed with apache-beam[gcp]; a C implementation.

        return google_crc32c.value
    except ImportError:  # Beam's own choice among snappy, google-crc32c and crcmod.
        from apache_beam.io.tfrecordio import _default_crc32c_fn

        return _default_crc32c_fn


def _masked_crc(data: bytes) -> int:
    crc = _crc32c()(data)
    return (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF


def read_tfrecords(stream: BinaryIO, path: str) -> Iterator[bytes]:
    """The records of a TFRecord stream, their CRCs checked.

    Raises:
      EmbeddingShardError: naming `path`, the record and its byte offset, for a file cut short or a
        CRC that does not match (a damaged copy: encode again or copy again).
    """
    offset, number = 0, 0
    while True:
        header = stream.read(_HEADER.size)
        if not header:
            return
        number += 1
        if len(header) < _HEADER.size:
            raise EmbeddingShardError(f"{path}: record {number} at byte {offset} is cut short (the file is truncated)")
        length, length_crc = _HEADER.unpack(header)
        if _masked_crc(header[:8]) != length_crc:
            raise EmbeddingShardError(f"{path}: record {number} at byte {offset}: the length's CRC does not match "
                                      "(not a TFRecord file, or a damaged one)")
        data = stream.read(length)
        footer = stream.read(_FOOTER.size)
        if len(data) < length or len(footer) < _FOOTER.size:
            raise EmbeddingShardError(f"{path}: record {number} at byte {offset} is cut short (the file is truncated)")
        if _masked_crc(data) != _FOOTER.unpack(footer)[0]:
            raise EmbeddingShardError(f"{path}: record {number} at byte {offset}: the data's CRC does not match "
                                      "(a damaged file)")
        offset += _HEADER.size + length + _FOOTER.size
        yield data


def write_tfrecords(stream: BinaryIO, records: Iterable[bytes]) -> int:
    """Writes `records` with the TFRecord framing (what TensorFlow and Beam read); returns the count."""
    count = 0
    for record in records:
        length = struct.pack("<Q", len(record))
        stream.write(length + struct.pack("<I", _masked_crc(length)) + record
                     + struct.pack("<I", _masked_crc(record)))
        count += 1
    return count


# --- tf.train.Example without TensorFlow -------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _example_class():
    """A message class with the wire format of tensorflow.Example (example.proto, feature.proto)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tapas_tf/retrieval/tf_example.proto", package="tensorflow",
                                               syntax="proto3")

    def message(name: str, *fields: Tuple[str, int, int, int, str], oneof: Optional[str] = None):
        result = proto.message_type.add(name=name)
        if oneof:
            result.oneof_decl.add(name=oneof)
        for field_name, number, label, kind, type_name in fields:
            field = result.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = type_name
            if oneof:
                field.oneof_index = 0
        return result

    message("BytesList", ("value", 1, F.LABEL_REPEATED, F.TYPE_BYTES, ""))
    message("FloatList", ("value", 1, F.LABEL_REPEATED, F.TYPE_FLOAT, ""))  # proto3: packed.
    message("Int64List", ("value", 1, F.LABEL_REPEATED, F.TYPE_INT64, ""))
    message("Feature", ("bytes_list", 1, F.LABEL_OPTIONAL, F.TYPE_MESSAGE, ".tensorflow.BytesList"),
            ("float_list", 2, F.LABEL_OPTIONAL, F.TYPE_MESSAGE, ".tensorflow.FloatList"),
            ("int64_list", 3, F.LABEL_OPTIONAL, F.TYPE_MESSAGE, ".tensorflow.Int64List"), oneof="kind")
    features = message("Features", ("feature", 1, F.LABEL_REPEATED, F.TYPE_MESSAGE,
                                    ".tensorflow.Features.FeatureEntry"))
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                    type_name=".tensorflow.Feature")
    message("Example", ("features", 1, F.LABEL_OPTIONAL, F.TYPE_MESSAGE, ".tensorflow.Features"))
    pool = descriptor_pool.DescriptorPool()  # Its own: TensorFlow's pool already has tensorflow.Example.
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


def encode_example(table_id: str, title: str, vector: np.ndarray) -> bytes:
    """The serialized tf.train.Example of one table's embedding (vector: float [d])."""
    example = _example_class()()
    feature = example.features.feature
    feature[TABLE_ID].bytes_list.value.append(table_id.encode("utf-8"))
    feature[TITLE].bytes_list.value.append(title.encode("utf-8"))
    feature[EMBEDDING].float_list.value.extend(np.asarray(vector, dtype=np.float32).tolist())
    return example.SerializeToString(deterministic=True)  # Map entries sorted: the same bytes in every process.


def decode_example(record: bytes) -> Tuple[str, str, Any]:
    """(table_id, title, embedding values) of a serialized Example; the values are a float sequence.

    Raises:
      ValueError: not an Example, or no table_id / embedding feature of the right kind.
    """
    from google.protobuf.message import DecodeError

    try:
        example = _example_class().FromString(record)
    except DecodeError as e:
        raise ValueError(f"not a tf.train.Example ({e})") from None
    feature = example.features.feature
    for name, kind in ((TABLE_ID, "bytes_list"), (EMBEDDING, "float_list")):
        if name not in feature or feature[name].WhichOneof("kind") != kind:
            raise ValueError(f"no {name!r} feature ({kind}); the features are {sorted(feature)}")
    ids = feature[TABLE_ID].bytes_list.value
    if len(ids) != 1:
        raise ValueError(f"{len(ids)} values of 'table_id'; one was expected")
    title = feature[TITLE].bytes_list.value if TITLE in feature else []
    return (ids[0].decode("utf-8"), title[0].decode("utf-8") if title else "",
            feature[EMBEDDING].float_list.value)


# --- files, local or through Beam ------------------------------------------------------------------


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}" if "://" in directory else os.path.join(directory, name)


def _base_name(path: str) -> str:
    return path.rsplit("/", 1)[-1] if "://" in path else os.path.basename(path)


def _open(path: str, mode: str = "rb"):
    if "://" not in path:
        return open(path, mode)
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    raw = CompressionTypes.UNCOMPRESSED
    return FileSystems.open(path, compression_type=raw) if mode == "rb" else \
        FileSystems.create(path, compression_type=raw)


def _exists(path: str) -> bool:
    if "://" not in path:
        return os.path.exists(path)
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.exists(path)


# --- metadata --------------------------------------------------------------------------------------


def shard_metadata(model_id: str, dimension: int, count: int, shards: Sequence[str],
                   skipped_by_reason: Optional[Dict[str, int]] = None, **extra: Any) -> Dict[str, Any]:
    """The object of embeddings.json; `shards` are file names in the directory (sorted here)."""
    return {"format_version": FORMAT_VERSION, "model_id": model_id, "dimension": int(dimension),
            "count": int(count), "record_format": RECORD_FORMAT, "shard_pattern": SHARD_PATTERN,
            "shards": sorted(_base_name(shard) for shard in shards),
            "skipped_by_reason": dict(sorted((skipped_by_reason or {}).items())), **extra}


def write_metadata(directory: str, metadata: Dict[str, Any]) -> str:
    """Writes embeddings.json into `directory` (replacing it whole: a reader never sees half of one)."""
    path = _join(directory, METADATA_FILE)
    data = (json.dumps(metadata, indent=1) + "\n").encode("utf-8")
    if "://" in path:  # Object stores write an object whole anyway.
        with _open(path, "wb") as f:
            f.write(data)
        return path
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)
    return path


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def read_metadata(directory: str) -> Dict[str, Any]:
    """embeddings.json of a shards directory, checked.

    Raises:
      EmbeddingShardError: naming the file when it is missing, not a JSON object, of another
        format_version, or without a positive dimension, a count or its shards' names.
    """
    path = _join(directory, METADATA_FILE)
    if not _exists(path):
        raise EmbeddingShardError(f"{path} is missing: {directory} is not a complete embedding shards "
                                  "directory (the job writes it last, after every shard)")
    try:
        with _open(path) as f:
            metadata = json.loads(f.read().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise EmbeddingShardError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(metadata, dict):
        raise EmbeddingShardError(f"{path} does not hold a JSON object")
    version = metadata.get("format_version")
    if version != FORMAT_VERSION:
        raise EmbeddingShardError(f"{path} has format_version {version!r}; this tapas-tf reads version "
                                  f"{FORMAT_VERSION} (encode the tables again)")
    if not _positive_int(metadata.get("dimension")):
        raise EmbeddingShardError(f"{path}: dimension must be a positive integer, got {metadata.get('dimension')!r}")
    count = metadata.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise EmbeddingShardError(f"{path}: count must be a non-negative integer, got {count!r}")
    shards = metadata.get("shards")
    if not isinstance(shards, list) or not all(isinstance(s, str) and s for s in shards):
        raise EmbeddingShardError(f"{path}: shards must be a list of file names, got {shards!r}")
    if not isinstance(metadata.get("model_id"), str):
        raise EmbeddingShardError(f"{path}: model_id must be a string, got {metadata.get('model_id')!r}")
    return metadata


# --- reading ---------------------------------------------------------------------------------------


def _check_expected(path: str, metadata: Dict[str, Any], dimension: Optional[int], model_id: Optional[str]) -> None:
    if dimension is not None and dimension != metadata["dimension"]:
        raise EmbeddingShardError(f"{path}: the shards hold vectors of dimension {metadata['dimension']}, "
                                  f"not {dimension} (embedded by another model?)")
    if model_id is not None and model_id != metadata["model_id"]:
        raise EmbeddingShardError(f"{path}: the shards were embedded by model {metadata['model_id']!r}, "
                                  f"not {model_id!r}")


def read_embedding_shards(directory: str, dimension: Optional[int] = None, model_id: Optional[str] = None
                          ) -> Tuple[List[str], np.ndarray, Dict[str, Any]]:
    """(ids [n], vectors float32 [n, d], the metadata of embeddings.json) of a shards directory.

    Row i of `vectors` is the embedding of `ids[i]`, in the order of the shards listed and of their
    records. `dimension` / `model_id`, when given, must be those of embeddings.json (the question
    encoder's).

    Raises:
      EmbeddingShardError: naming the file for bad metadata (see `read_metadata`), a listed shard
        that is missing, a record that is cut short, damaged or not an Example of the format, an
        embedding of another length than `dimension`, a table id seen before, or a number of records
        other than `count`.
    """
    meta_path = _join(directory, METADATA_FILE)
    metadata = read_metadata(directory)
    _check_expected(meta_path, metadata, dimension, model_id)
    count, dim = metadata["count"], metadata["dimension"]
    vectors = np.empty((count, dim), dtype=np.float32)
    ids: List[str] = []
    row_of: Dict[str, int] = {}
    starts: List[Tuple[int, str]] = []  # (first row, shard path): names where a duplicate was first seen.
    for name in metadata["shards"]:
        path = _join(directory, name)
        if not _exists(path):
            raise EmbeddingShardError(f"{path} is missing; {meta_path} lists it")
        starts.append((len(ids), path))
        with _open(path) as f:
            for number, record in enumerate(read_tfrecords(f, path), start=1):
                row = len(ids)
                where = f"{path}: record {number}"
                try:
                    table_id, _, values = decode_example(record)
                except ValueError as e:
                    raise EmbeddingShardError(f"{where}: {e}") from None
                if row >= count:
                    raise EmbeddingShardError(f"{where}: more records than the count {count} of {meta_path} "
                                              "(a shard of another run?)")
                if len(values) != dim:
                    raise EmbeddingShardError(f"{where} ({table_id!r}) has an embedding of {len(values)} values; "
                                              f"{meta_path} says dimension {dim}")
                if table_id in row_of:
                    first = row_of[table_id]
                    start, first_path = max((s for s in starts if s[0] <= first), key=lambda s: s[0])
                    raise EmbeddingShardError(f"{where}: table id {table_id!r} again (first in {first_path}: record "
                                              f"{first - start + 1}); the ids of an index must be unique")
                vectors[row] = values
                row_of[table_id] = row
                ids.append(table_id)
    if len(ids) != count:
        raise EmbeddingShardError(f"{directory}: the shards hold {len(ids)} records but {meta_path} says count "
                                  f"{count} (a shard is missing or was rewritten)")
    return ids, vectors, metadata


def read_embedding_records(directory: str) -> Iterator[Tuple[str, str, np.ndarray]]:
    """(table_id, title, embedding float32 [d]) of every record, shard by shard: for the titles,
    or a pass that needs no [n, d] array. Checks the metadata only (see `read_embedding_shards`)."""
    metadata = read_metadata(directory)
    for name in metadata["shards"]:
        path = _join(directory, name)
        with _open(path) as f:
            for number, record in enumerate(read_tfrecords(f, path), start=1):
                try:
                    table_id, title, values = decode_example(record)
                except ValueError as e:
                    raise EmbeddingShardError(f"{path}: record {number}: {e}") from None
                yield table_id, title, np.asarray(values, dtype=np.float32)


# --- writing without Beam --------------------------------------------------------------------------


def shard_name(index: int, num_shards: int) -> str:
    """`embeddings-00001-of-00004.tfrecord`: Beam's default shard template."""
    return f"{SHARD_PREFIX}-{index:05d}-of-{num_shards:05d}{SHARD_SUFFIX}"


def write_embedding_shards(directory: str, ids: Sequence[str], titles: Sequence[str], vectors: Any,
                           model_id: str, num_shards: int = 1,
                           skipped_by_reason: Optional[Dict[str, int]] = None, **extra: Any) -> Dict[str, Any]:
    """Writes `vectors` (float [n, d], row i for ids[i]) as `num_shards` shards and embeddings.json,
    as the Beam job lays them out (a local directory); returns the metadata. For collections small
    enough to embed in one process, and for tests."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(ids) != len(vectors) or len(titles) != len(vectors):
        raise ValueError(f"{len(ids)} ids and {len(titles)} titles for vectors of shape {vectors.shape}")
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    os.makedirs(directory, exist_ok=True)
    bounds = np.linspace(0, len(ids), num_shards + 1).astype(int)
    names = []
    for index in range(num_shards):
        names.append(shard_name(index, num_shards))
        with open(os.path.join(directory, names[-1]), "wb") as f:
            write_tfrecords(f, (encode_example(ids[row], titles[row], vectors[row])
                                for row in range(bounds[index], bounds[index + 1])))
    metadata = shard_metadata(model_id, vectors.shape[1], len(ids), names, skipped_by_reason, **extra)
    write_metadata(directory, metadata)
    return metadata


# --- the index -------------------------------------------------------------------------------------


def build_vector_index_from_shards(directory: str, index_dir: Optional[str] = None, kind: str = "auto",
                                   dimension: Optional[int] = None, model_id: Optional[str] = None,
                                   **params: Any):
    """A `VectorIndex` of the shards' vectors (`kind` and `params` as `VectorIndex.build` takes them).

    With `index_dir`, the index is saved there, with EMBEDDING_MODEL_FILE beside its files: the
    model id and dimension of the shards, which the question encoder must match.

    Raises:
      EmbeddingShardError: see `read_embedding_shards`; also for shards that hold no vector.
      ValueError: what `VectorIndex.build` refuses (NaN vectors, an unknown kind, ...).
    """
    from tapas_tf.retrieval.vector_index import VectorIndex

    ids, vectors, metadata = read_embedding_shards(directory, dimension, model_id)
    if not ids:
        raise EmbeddingShardError(f"{_join(directory, METADATA_FILE)}: no embeddings (count 0): nothing to index")
    index = VectorIndex.build(vectors, ids, kind=kind, **params)
    if index_dir is not None:
        index.save(index_dir)
        model = {"model_id": metadata["model_id"], "dimension": metadata["dimension"], "count": metadata["count"],
                 "shards_dir": directory if "://" in directory else os.path.abspath(directory)}
        with open(os.path.join(index_dir, EMBEDDING_MODEL_FILE), "w", encoding="utf-8") as f:
            json.dump(model, f, indent=1)
    return index
