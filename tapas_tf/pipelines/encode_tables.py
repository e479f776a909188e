"""Beam transforms of the encoding job: a table collection -> embeddings -> embedding shards.

    keys --ReadTables--> tables --EmbedTables--> (table id, record) --KeepOnePerTable--> records
         --WriteEmbeddingShards--> OUTPUT_DIR/embeddings-SSSSS-of-NNNNN.tfrecord, embeddings.json

The per-table work is retrieval's (`tapas_tf.retrieval.collection_encoding`, which this room may not
import): the job hands these transforms a *source* and an *encoder*, small picklable objects with
the methods below, and a worker opens the collection and loads the embedder once, in setup.

- source: `kind`, `key_unit` ("tables", "interaction_files"), `open()`, `list_keys() -> [key]`,
  `read(key) -> iterator of (table, skip)` (exactly one set), `unexpected_failure(key, error) -> skip`;
- encoder: `load()`, `embed(tables) -> (embedded, skipped, retried)`, each embedded item with
  `table_id`, `source`, `fingerprint` and `record` (the serialized tf.train.Example),
  `write_metadata(output_dir, shards, count, skipped_by_reason, **extra)`, `shard_prefix`,
  `shard_suffix`;
- a skip: `table_id`, `source`, `reason`, `message`, `whole_file`.

Keys are listed on a worker (six million table ids never pass through the job graph) and spread
with a Reshuffle, so reading and embedding run on every worker. Every table is counted in the
`tapas_tf` namespace: `tables_seen` (every input table: a listed one, an interaction record) ==
`tables_embedded` + `tables_repeated` (the same id with the same cells again, embedded once) +
the sum of `tables_skipped_<reason>`; a file not read to its end is `files_failed_<reason>`. Each
skip is a row of the `failed` output (`FAILURE_COLUMNS`), which the job writes to its failures file.
"""

import logging
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam import pvalue

from tapas_tf.pipelines import one_file, progress
from tapas_tf.pipelines.classifier_data import counter

FAILED = "failed"
FAILURE_COLUMNS = ("table_id", "source", "reason", "message", "lost")
TABLE, FILE = "table", "file"  # The `lost` column: one table, or the rest of a file.
DUPLICATE_TABLE_ID = "duplicate_table_id"
PROGRESS_UNITS = ("tables", "embedded")

# One failures-file row: FAILURE_COLUMNS.
FailureRow = Tuple[str, str, str, str, str]


def failure_row(skip: Any) -> FailureRow:
    """A source's or the encoder's skip as a row of the failed output."""
    return (skip.table_id, skip.source, skip.reason, skip.message, FILE if skip.whole_file else TABLE)


def format_failure(row: FailureRow) -> str:
    """One line of the failures TSV; tabs and line breaks in a field become spaces."""
    return "\t".join(" ".join(str(field).split()) for field in row)


def parse_failure_line(line: str) -> Dict[str, str]:
    return dict(zip(FAILURE_COLUMNS, (line.rstrip("\n").split("\t") + [""] * len(FAILURE_COLUMNS))))


def _skipped(row: FailureRow) -> Iterator[pvalue.TaggedOutput]:
    """Counts a failure row and sends it to the failed output."""
    reason, lost = row[2], row[4]
    counter(f"files_failed_{reason}" if lost == FILE else f"tables_skipped_{reason}").inc()
    yield pvalue.TaggedOutput(FAILED, row)


# --- reading ---------------------------------------------------------------------------------------


class _ListKeysFn(beam.DoFn):
    def __init__(self, source: Any):
        self._source = source
        self._listed = counter(f"{source.key_unit}_listed")

    def process(self, _) -> Iterator[str]:
        keys = self._source.list_keys()
        self._listed.inc(len(keys))
        yield from keys


class _ReadFn(beam.DoFn):
    """A key (table id, interaction file) -> its tables, and a failed row for each one skipped."""

    def __init__(self, source: Any, progress_key: Optional[str] = None):
        self._source = source
        self._progress_key = progress_key
        self._seen = counter("tables_seen")
        self._read = counter("tables_read")
        self._truncated = counter("tables_rows_truncated")

    def setup(self):
        self._source.open()  # Once per worker: a folder's listing, a database connection.

    def process(self, key: str) -> Iterator:
        try:
            for table, skip in self._source.read(key):
                if skip is not None:
                    if not skip.whole_file:
                        self._seen.inc()
                    yield from _skipped(failure_row(skip))
                    continue
                self._seen.inc()
                self._read.inc()
                if table.rows_truncated:
                    self._truncated.inc()
                progress.report(self._progress_key, tables=1)
                yield table
        except Exception as error:  # pylint: disable=broad-except  (a reader bug costs this key only)
            logging.exception("reading %s failed", key)
            skip = self._source.unexpected_failure(key, error)
            if not skip.whole_file:
                self._seen.inc()
            yield from _skipped(failure_row(skip))


class ReadTables(beam.PTransform):
    """The source's tables; outputs `tables` (CollectionTables) and `failed` (FAILURE_COLUMNS rows)."""

    def __init__(self, source: Any, progress_key: Optional[str] = None):
        super().__init__()
        self._source = source
        self._progress_key = progress_key

    def expand(self, root):
        return (root
                | "Start" >> beam.Create([None])
                | "ListKeys" >> beam.ParDo(_ListKeysFn(self._source))
                | "Spread" >> beam.Reshuffle()
                | "Read" >> beam.ParDo(_ReadFn(self._source, self._progress_key)).with_outputs(FAILED, main="tables"))


# --- embedding -------------------------------------------------------------------------------------


class _EmbedFn(beam.DoFn):
    """A batch of tables -> (table id, (fingerprint, source, record)) per table embedded."""

    def __init__(self, encoder: Any, progress_key: Optional[str] = None):
        self._encoder = encoder
        self._progress_key = progress_key
        self._batches = counter("embedding_batches")
        self._retried = counter("embedding_batches_retried")
        self._encoded = counter("tables_encoded")

    def setup(self):
        self._encoder.load()  # The model, once per worker (not per element, not pickled).

    def process(self, batch: List[Any]) -> Iterator:
        embedded, skipped, retried = self._encoder.embed(batch)
        self._batches.inc()
        if retried:
            self._retried.inc()
        self._encoded.inc(len(embedded))
        progress.report(self._progress_key, embedded=len(embedded))
        for item in embedded:
            yield item.table_id, (item.fingerprint, item.source, item.record)
        for skip in skipped:
            yield from _skipped(failure_row(skip))


class EmbedTables(beam.PTransform):
    """Tables -> keyed embedding records (`records`) and `failed`, `batch_size` tables per embed call."""

    def __init__(self, encoder: Any, batch_size: int, progress_key: Optional[str] = None):
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._encoder = encoder
        self._batch_size = batch_size
        self._progress_key = progress_key

    def expand(self, tables):
        # A fixed size (min = max): a model's memory is sized for one batch, and BatchElements'
        # adaptive sizing would grow batches past it whenever embedding is fast.
        return (tables
                | "Batch" >> beam.BatchElements(min_batch_size=self._batch_size, max_batch_size=self._batch_size)
                | "Embed" >> beam.ParDo(_EmbedFn(self._encoder, self._progress_key)).with_outputs(
                    FAILED, main="records"))


# --- one record per table id -----------------------------------------------------------------------


def keep_one(table_id: str, candidates: Sequence[Tuple[str, str, bytes]]) -> Tuple[bytes, int, List[FailureRow]]:
    """Of the embeddings of one table id ((fingerprint, source, record) each): the record kept, how
    many were the same table again (same cells), and a failure row for each other table of the id.

    The lowest (fingerprint, source) is kept: the same choice whatever order the runner gave.
    """
    ordered = sorted(candidates, key=lambda c: (c[0], c[1]))
    kept_fingerprint, kept_source, record = ordered[0]
    repeated, rows = 0, []
    for fingerprint, source, _ in ordered[1:]:
        if fingerprint == kept_fingerprint:
            repeated += 1
        else:
            message = (f"{source}: table id {table_id!r} is also {kept_source}, whose title or cells differ; "
                       "that one was embedded")
            rows.append((table_id, source, DUPLICATE_TABLE_ID, message, TABLE))
    return record, repeated, rows


class _KeepOneFn(beam.DoFn):
    def __init__(self):
        self._embedded = counter("tables_embedded")
        self._repeated = counter("tables_repeated")

    def process(self, keyed: Tuple[str, Any]) -> Iterator:
        table_id, candidates = keyed
        record, repeated, rows = keep_one(table_id, list(candidates))
        self._embedded.inc()
        self._repeated.inc(repeated)
        yield record
        for row in rows:
            yield from _skipped(row)


class KeepOnePerTable(beam.PTransform):
    """Keyed records -> one record per table id (`records`), and `failed` for other tables of an id.

    Interactions repeat a table (one per question sequence) and two files may hold one id; an index
    needs each id once. Grouping after embedding moves vectors (a kilobyte a table at d 256), not
    tables, through the shuffle.
    """

    def expand(self, keyed):
        return (keyed
                | "ByTableId" >> beam.GroupByKey()
                | "KeepOne" >> beam.ParDo(_KeepOneFn()).with_outputs(FAILED, main="records"))


# --- writing ---------------------------------------------------------------------------------------


def _reason_key(row: FailureRow) -> Tuple[str, str]:
    return row[4], row[2]


def _write_metadata(_, encoder: Any, output_dir: str, extra: Dict[str, Any], shards: List[str], count: int,
                    reasons: List[Tuple[Tuple[str, str], int]]) -> str:
    skipped = {reason: n for (lost, reason), n in reasons if lost == TABLE}
    files_failed = {reason: n for (lost, reason), n in reasons if lost == FILE}
    return encoder.write_metadata(output_dir, shards, count, skipped, files_failed_by_reason=files_failed, **extra)


class WriteEmbeddingShards(beam.PTransform):
    """Writes records to OUTPUT_DIR/PREFIX-SSSSS-of-NNNNN SUFFIX, then embeddings.json (once every shard
    is in place: it lists them, with the count and the skips by reason of `failed`).

    `num_shards` 0 lets the runner choose. Output: a PCollection holding the metadata file's path.
    """

    def __init__(self, encoder: Any, output_dir: str, failed, num_shards: int = 0,
                 extra: Optional[Dict[str, Any]] = None):
        super().__init__()
        self._encoder = encoder
        self._output_dir = output_dir
        self._failed = failed
        self._num_shards = num_shards
        self._extra = dict(extra or {})

    def expand(self, records):
        prefix = f"{self._output_dir.rstrip('/')}/{self._encoder.shard_prefix}"
        shards = records | "WriteShards" >> beam.io.WriteToTFRecord(
            prefix, file_name_suffix=self._encoder.shard_suffix, num_shards=self._num_shards)
        count = records | "Count" >> beam.combiners.Count.Globally()
        reasons = (self._failed
                   | "ReasonOf" >> beam.Map(_reason_key)
                   | "CountByReason" >> beam.combiners.Count.PerElement())
        return (records.pipeline
                | "MetadataStart" >> beam.Create([None])
                | "WriteMetadata" >> beam.Map(_write_metadata, self._encoder, self._output_dir, self._extra,
                                              shards=beam.pvalue.AsList(shards), count=beam.pvalue.AsSingleton(count),
                                              reasons=beam.pvalue.AsList(reasons)))


def write_failures(failed, path: str):
    """The failed rows -> one TSV file at `path` with a header line (written even when nothing failed)."""
    return (failed
            | "FormatFailures" >> beam.Map(format_failure)
            | "WriteFailures" >> one_file.WriteToOneFile(path, kind=one_file.TEXT, header="\t".join(FAILURE_COLUMNS)))
