"""The per-table steps of encoding a collection into embedding shards, as plain functions and objects.

    source = CollectionSource("my_tables/")               # or InteractionSource(["out/interactions/*.tfrecord"])
    encoder = TableEncoder.from_model_dir("model_dirs/dual")
    for key in source.list_keys():                        # table ids, or interaction files
        for table, skip in source.read(key): ...          # a CollectionTable, or the TableSkip saying why not
    outcome = encoder.embed(tables)                       # EmbedOutcome: embedded records, skips, retried?

The Beam job (`tapas_tf.pipelines.encode_tables`, `tapas-tf encode-tables`) runs these on its
workers: the sources and the encoder are small picklable objects (specs and paths), and each
worker opens the collection and loads the embedder once, in its DoFn's setup (`open`, `load`);
neither the open collection nor the model is pickled.

Every input table ends up embedded or as a `TableSkip` with its reason: a collection's own
(`unreadable`, `empty`, `binary`, `bad_csv`), an interaction's (`no_table_id`, `empty`,
`bad_table`, `bad_record`), or the embedder's (`embedding_failed`: embed_tables raised for the
table alone; `embedding_not_finite`: its vector holds NaN or infinity, which an index refuses). A
batch whose embed_tables call raises is embedded again table by table, so only the tables that
fail alone are lost. A file that cannot be read to its end is a `TableSkip` with `whole_file`:
its tables after the damage are not known, so they cannot be counted one by one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from tapas_tf.data import interaction_io
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.retrieval import collection as collection_module, embedding_shards
from tapas_tf.retrieval.collection import CollectionTable, TableCollection, open_collection
from tapas_tf.retrieval.embedder import TableEmbedder, load_embedder

__all__ = ["CollectionSource", "EmbedOutcome", "EmbeddedTable", "InteractionSource", "TableEncoder",
           "TableSkip", "checked_vectors", "embed_batch", "read_collection_table", "table_fingerprint",
           "table_from_interaction"]

log = logging.getLogger(__name__)

EMBEDDING_FAILED = "embedding_failed"
EMBEDDING_NOT_FINITE = "embedding_not_finite"
UNEXPECTED = "unexpected_error"


class TableSkip(NamedTuple):
    """An input table that was not embedded, or (`whole_file`) a file not read to its end."""

    table_id: str  # "" where it is not known (a record that does not parse, a whole file).
    source: str
    reason: str
    message: str
    whole_file: bool = False


# What reading one key gives, item by item: exactly one of the two is set.
ReadItem = Tuple[Optional[CollectionTable], Optional[TableSkip]]


def _skip(table_id: str, source: str, reason: str, message: str, whole_file: bool = False) -> ReadItem:
    return None, TableSkip(table_id, source, reason, message, whole_file)


# --- a collection: folders, SQLite, SQLAlchemy URLs ------------------------------------------------


def read_collection_table(collection: TableCollection, table_id: str) -> ReadItem:
    """One listed table of `collection` as a pass over it would give it, or the skip with its reason."""
    # Not TableCollection.read_table: it raises for a skipped table without its reason, and checks
    # the id against a set of every id on each call (O(n) a table: hours at a million tables).
    item = collection._source.read_one(table_id, collection.max_rows)
    if isinstance(item, collection_module._Skip):
        return _skip(table_id, item.source, item.reason, item.message)
    title = collection._titles.get(item.table_id, item.default_title)
    return CollectionTable(item.table_id, item.source, title, item.frame, item.rows_total, item.rows_truncated), None


class CollectionSource:
    """The tables of a collection spec (`open_collection`'s arguments); keys are table ids."""

    kind = "collection"
    key_unit = "tables"  # What list_keys lists (the job counts `{key_unit}_listed`).

    def __init__(self, spec: str, titles_file: Optional[str] = None, max_rows: int = 1000,
                 patterns: Optional[Sequence[str]] = None):
        # Absolute: a worker process may run elsewhere in the file system tree.
        self.spec = collection_module.absolute_spec(os.fspath(spec))
        self.titles_file = os.path.abspath(titles_file) if titles_file else None
        self.max_rows = max_rows
        self.patterns = list(patterns) if patterns else None
        self._collection: Optional[TableCollection] = None

    def __getstate__(self) -> Dict[str, Any]:
        # An open collection may hold a database engine; each worker opens its own.
        return {**self.__dict__, "_collection": None}

    def open(self) -> TableCollection:
        """The open collection (opened once); raises CollectionError for a bad spec or titles file."""
        if self._collection is None:
            self._collection = open_collection(self.spec, self.titles_file, self.max_rows, self.patterns)
        return self._collection

    def list_keys(self) -> List[str]:
        return self.open().table_ids

    def read(self, table_id: str) -> Iterator[ReadItem]:
        yield read_collection_table(self.open(), table_id)

    def unexpected_failure(self, table_id: str, error: BaseException) -> TableSkip:
        return TableSkip(table_id, table_id, UNEXPECTED, f"{table_id}: {type(error).__name__}: {error}")

    def describe(self) -> Dict[str, Any]:
        """What the job's report and embeddings.json say of the input (a URL without its password)."""
        return {"tables": collection_module.recorded_spec(self.spec), "titles": self.titles_file,
                "patterns": self.patterns, "max_rows": self.max_rows}


# --- interactions: the Wikipedia job's tables, a task's create-data output --------------------------


def _frame(header: List[str], rows: List[List[str]]) -> pd.DataFrame:
    # Strings as a collection's frames hold them (the embedder sees one kind of table); duplicate
    # column names are kept, as the reader's tables keep them.
    return pd.DataFrame(rows, columns=pd.Index(header, dtype=object), dtype=str)


def table_from_interaction(interaction: interaction_pb2.Interaction, path: str, max_rows: int = 1000) -> ReadItem:
    """The table of an Interaction as a collection's table: id `table.table_id`, title
    `table.document_title`, at most `max_rows` rows; or the skip saying why it has none."""
    table = interaction.table
    source = f"{path}#{interaction.id}" if interaction.id else path
    if not table.table_id:
        return _skip("", source, "no_table_id", f"{source}: the interaction's table has no table_id")
    header = [column.text for column in table.columns]
    if not header or not table.rows:
        return _skip(table.table_id, source, "empty", f"{source}: the table has no {'columns' if not header else 'rows'}")
    rows = []
    for number, row in enumerate(table.rows[:max_rows], start=1):
        cells = [cell.text for cell in row.cells]
        if len(cells) > len(header):
            return _skip(table.table_id, source, "bad_table",
                         f"{source}: row {number} has {len(cells)} cells, the header {len(header)}")
        rows.append(cells + [""] * (len(header) - len(cells)))  # A short row: as a CSV reader pads it.
    return CollectionTable(table.table_id, source, table.document_title, _frame(header, rows),
                           len(table.rows), len(table.rows) > max_rows), None


def _open_binary(path: str):
    """Any path Beam's file systems know (local, gs://, ...), raw bytes (no decompression)."""
    if "://" not in path:
        return open(path, "rb")
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def match_files(patterns: Sequence[str]) -> List[str]:
    """The files the globs match, sorted, each once.

    Raises:
      FileNotFoundError: naming the first pattern that matches no file.
    """
    from apache_beam.io.filesystems import FileSystems

    paths = set()
    for pattern, result in zip(patterns, FileSystems.match(list(patterns))):
        found = [metadata.path for metadata in result.metadata_list]
        if not found:
            raise FileNotFoundError(f"--interactions={pattern}: no file matches")
        paths.update(found)
    return sorted(paths)


class InteractionSource:
    """The tables of interaction files (TFRecords of Interactions, or .txtpb[.gz]); keys are files."""

    kind = "interactions"
    key_unit = "interaction_files"

    def __init__(self, patterns: Sequence[str], max_rows: int = 1000):
        if not patterns:
            raise ValueError("InteractionSource needs at least one file pattern")
        self.patterns = [p if "://" in p else os.path.abspath(p) for p in patterns]
        self.max_rows = max_rows

    def open(self) -> None:
        """Nothing to open: each file is opened as it is read."""

    def list_keys(self) -> List[str]:
        """The matched files; FileNotFoundError for a pattern that matches none."""
        return match_files(self.patterns)

    def read(self, path: str) -> Iterator[ReadItem]:
        try:
            for item in interaction_io.read_interactions_counting_lines(path, opener=_open_binary):
                if isinstance(item, interaction_io.InteractionFormatError):
                    yield _skip("", path, "bad_record", str(item))
                else:
                    yield table_from_interaction(item, path, self.max_rows)
        except interaction_io.InteractionFileError as e:
            yield _skip("", e.path or path, e.reason, str(e), whole_file=True)

    def unexpected_failure(self, path: str, error: BaseException) -> TableSkip:
        return TableSkip("", path, UNEXPECTED, f"{path}: {type(error).__name__}: {error} (the rest of the file "
                         "was not read)", whole_file=True)

    def describe(self) -> Dict[str, Any]:
        return {"interactions": self.patterns, "max_rows": self.max_rows}


# --- embedding -------------------------------------------------------------------------------------


def table_fingerprint(table: CollectionTable) -> str:
    """A digest of what the embedder reads (title, header, cells): tells two tables of one id apart."""
    content = [table.title, [str(c) for c in table.frame.columns], table.frame.to_numpy(dtype=object).tolist()]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


class EmbeddedTable(NamedTuple):
    table_id: str
    source: str
    fingerprint: str  # table_fingerprint: picks one of two tables with one id, the same in every run.
    record: bytes  # The serialized tf.train.Example of the shards (embedding_shards.encode_example).


class EmbedOutcome(NamedTuple):
    embedded: List[EmbeddedTable]
    skipped: List[TableSkip]
    retried: bool  # The batch as a whole failed, and each table was embedded alone.


def checked_vectors(output: Any, count: int, dimension: int) -> np.ndarray:
    """embed_tables' output as float32 [count, dimension]; ValueError for another shape or non-numbers."""
    vectors = np.asarray(output)
    if vectors.shape != (count, dimension):
        raise ValueError(f"embed_tables returned shape {vectors.shape} for {count} tables; expected "
                         f"({count}, {dimension})")
    if not (np.issubdtype(vectors.dtype, np.floating) or np.issubdtype(vectors.dtype, np.integer)):
        raise ValueError(f"embed_tables returned dtype {vectors.dtype}; expected float32")
    return vectors.astype(np.float32, copy=False)


def _failure_message(table: CollectionTable, error: BaseException) -> str:
    return f"{table.source}: {type(error).__name__}: {error}"


def _embedded(tables: Sequence[CollectionTable], vectors: np.ndarray) -> EmbedOutcome:
    embedded, skipped = [], []
    finite = np.isfinite(vectors).all(axis=1)
    for table, vector, ok in zip(tables, vectors, finite):
        if not ok:
            skipped.append(TableSkip(table.table_id, table.source, EMBEDDING_NOT_FINITE,
                                     f"{table.source}: the embedding holds NaN or infinite values"))
            continue
        embedded.append(EmbeddedTable(table.table_id, table.source, table_fingerprint(table),
                                      embedding_shards.encode_example(table.table_id, table.title, vector)))
    return EmbedOutcome(embedded, skipped, False)


def embed_batch(embedder: TableEmbedder, tables: Sequence[CollectionTable]) -> EmbedOutcome:
    """Embeds `tables` in one call; when that raises (or returns the wrong shape), each table alone,
    so that one bad table costs itself only. Never raises for the embedder's errors."""
    tables = list(tables)
    if not tables:
        return EmbedOutcome([], [], False)
    try:
        vectors = checked_vectors(embedder.embed_tables(tables), len(tables), embedder.dimension)
    except Exception as error:  # noqa: BLE001  Any error of the model's costs its tables only.
        if len(tables) == 1:
            log.warning("embedding %s failed: %s", tables[0].source, error)
            return EmbedOutcome([], [TableSkip(tables[0].table_id, tables[0].source, EMBEDDING_FAILED,
                                               _failure_message(tables[0], error))], False)
        log.warning("embedding a batch of %d tables failed (%s); embedding each alone", len(tables), error)
    else:
        return _embedded(tables, vectors)  # Outside the try: an error of ours is not the model's.
    embedded, skipped = [], []
    for table in tables:
        outcome = embed_batch(embedder, [table])
        embedded += outcome.embedded
        skipped += outcome.skipped
    return EmbedOutcome(embedded, skipped, True)


class TableEncoder:
    """Embeds batches of tables with the embedder of a model directory, loaded once per process.

    Picklable (the model directory and the model id and dimension the driver saw); `load` builds
    the embedder and refuses one whose model_id or dimension differ from the driver's, which would
    mix two models' vectors in one set of shards.
    """

    shard_prefix = embedding_shards.SHARD_PREFIX
    shard_suffix = embedding_shards.SHARD_SUFFIX
    failures_file = "failures.tsv"

    def __init__(self, model_dir: str, model_id: str, dimension: int):
        self.model_dir = model_dir if "://" in model_dir else os.path.abspath(model_dir)
        self.model_id = model_id
        self.dimension = int(dimension)
        self._embedder: Optional[TableEmbedder] = None

    @classmethod
    def from_model_dir(cls, model_dir: str) -> "TableEncoder":
        """Loads the embedder here (the driver): a bad model directory fails before any job starts."""
        embedder = load_embedder(model_dir)
        encoder = cls(model_dir, embedder.model_id, embedder.dimension)
        encoder._embedder = embedder
        return encoder

    def __getstate__(self) -> Dict[str, Any]:
        return {**self.__dict__, "_embedder": None}  # A model is loaded by each worker, never pickled.

    def load(self) -> TableEmbedder:
        if self._embedder is None:
            embedder = load_embedder(self.model_dir)
            if (embedder.model_id, int(embedder.dimension)) != (self.model_id, self.dimension):
                raise ValueError(f"{self.model_dir}: the model changed while the job ran: model {embedder.model_id!r} "
                                 f"of dimension {embedder.dimension} here, {self.model_id!r} of dimension "
                                 f"{self.dimension} when it started")
            self._embedder = embedder
        return self._embedder

    def embed(self, tables: Sequence[CollectionTable]) -> EmbedOutcome:
        return embed_batch(self.load(), tables)

    def write_metadata(self, output_dir: str, shards: Sequence[str], count: int,
                       skipped_by_reason: Dict[str, int], **extra: Any) -> str:
        """Writes OUTPUT_DIR/embeddings.json (`embedding_shards.shard_metadata`); returns its path."""
        metadata = embedding_shards.shard_metadata(self.model_id, self.dimension, count, shards, skipped_by_reason,
                                                   model_dir=self.model_dir, **extra)
        return embedding_shards.write_metadata(output_dir, metadata)

    def describe(self) -> Dict[str, Any]:
        return {"model_dir": self.model_dir, "model_id": self.model_id, "dimension": self.dimension}
