"""Beam transforms of the pre-training data job: pages -> Interactions -> masked-LM examples.

    extract:  dump files / rendered pages --ExtractTables--> Interactions (Google's corpus format)
    examples: Interactions --ToPretrainExamples--> masked-LM tf.Examples, split train / test

Files are matched with Beam's `fileio` and each is streamed by one worker: an XML dump with a
pull parser (a multistream dump with its index is cut into byte ranges of streams first, so that
one big file is read by many workers), a rendered page whole. Nothing holds more than one page in
memory, so memory does not grow with the input. Every page, table and example is counted in the
`tapas_tf` counter namespace by what became of it (`pages_*`, `tables_*`, `examples_*`,
`interactions_*`), and the job's report is built from those counters. Given a `progress_key`,
the pages read and the examples written are also reported to the job's progress
(`tapas_tf.pipelines.progress`) as they go.

A bad element of a file that reads (a page the wikitext parser rejects, a line that is not an
Interaction) is counted and skipped. A file that cannot be read to its end (a truncated or damaged
bz2 or gzip stream, broken XML, a page that is not UTF-8, a TFRecord cut short) is a file failure:
what was read before the damage is kept, the failure is counted (`files_failed_{reason}`), logged,
and, given `failures_path`, written there as a `path<TAB>reason<TAB>message` line, so that the job
can fail with the file and the byte named rather than end as if the file were whole.
"""

import logging
import os
from typing import Dict, FrozenSet, Iterable, Iterator, Optional, Tuple

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from google.protobuf import text_format

from tapas_tf.data import interaction_io, number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.table_collection import normal_title, normalize_exclusion
from tapas_tf.features.pretrain_config import PretrainConfig, PretrainSkip, split_of
from tapas_tf.pipelines import progress
from tapas_tf.pipelines.classifier_data import counter
from tapas_tf.wikipedia import dump_reader, html_pages, html_tables, wikitext_tables
from tapas_tf.wikipedia.pretrain_interactions import ExtractedTable, to_interaction

SPLITS = ("train", "test")
FILE_FAILURES = "file_failures"  # The tagged output of the DoFns that read files.
# Page problems that mean the page's file could not be read (not a page the extractor rejects).
PAGE_FILE_REASONS = frozenset(html_pages.PAGE_ERROR_REASONS)
# Streams of a multistream dump read by one worker (about 100 pages each).
STREAMS_PER_RANGE = 10


# --- exclusion ----------------------------------------------------------------------------------


def read_exclusions(path: str) -> FrozenSet[str]:
    with FileSystems.open(path) as f:
        names = (normalize_exclusion(line) for line in f.read().decode("utf-8").splitlines())
        return frozenset(name for name in names if name)


def is_excluded(extracted: ExtractedTable, title: str, excluded: FrozenSet[str]) -> bool:
    names = {extracted.table.table_id, f"title:{normal_title(title)}", *getattr(extracted, "aliases", ())}
    return bool(names & excluded)


# --- extraction -----------------------------------------------------------------------------


def _emit(tables: Iterable[ExtractedTable], rejections, title: str, excluded: FrozenSet[str]):
    # Mended markup (`tables_autoclosed`, `tables_infobox_recovered`) is counted whatever became of the
    # table; the grid rules' limits (`grid_spans_narrowed`, `grid_empty_rows_dropped`, ...) per kept table.
    for rejection in rejections:
        counter(f"tables_rejected_{rejection.reason}").inc()
        for repair in rejection.repairs:
            counter(f"tables_{repair}").inc()
    for extracted in tables:
        for repair in extracted.repairs:
            counter(f"tables_{repair}").inc()
        for name, value in vars(extracted.stats).items():
            if value:
                counter(f"grid_{name}").inc(value)
        if is_excluded(extracted, title, excluded):
            counter("tables_excluded").inc()
            continue
        counter(f"tables_extracted_{extracted.kind}").inc()
        yield to_interaction(extracted)


class _SplitDumpFn(beam.DoFn):
    """A dump path -> (path, start, end) byte ranges: stream ranges when a multistream index is
    beside it (`...-multistream.xml.bz2` and `...-multistream-index.txt.bz2`), else the whole file."""

    def __init__(self, streams_per_range: int):
        self._streams_per_range = streams_per_range

    def process(self, path: str) -> Iterator[Tuple[str, Optional[int], Optional[int]]]:
        index = multistream_index(path)
        if index is None:
            yield path, None, None
            return
        ranges = dump_reader.stream_ranges(dump_reader.stream_offsets(index), self._streams_per_range)
        counter("dump_ranges").inc(len(ranges))
        for start, end in ranges:
            yield path, start, end


def multistream_index(path: str) -> Optional[str]:
    if not path.endswith("-multistream.xml.bz2"):
        return None
    index = path[: -len(".xml.bz2")] + "-index.txt.bz2"
    return index if FileSystems.exists(index) else None


class _ExcludingFn(beam.DoFn):
    """A DoFn that loads the exclusion file once per worker (`self._excluded`) and reports the pages
    it reads to the progress of `progress_key`."""

    def __init__(self, exclusions_path: Optional[str], progress_key: Optional[str] = None):
        self._exclusions_path = exclusions_path
        self._progress_key = progress_key
        self._excluded: FrozenSet[str] = frozenset()

    def setup(self):
        self._excluded = read_exclusions(self._exclusions_path) if self._exclusions_path else frozenset()


class _ExtractDumpFn(_ExcludingFn):
    """A byte range of a dump -> Interactions of its pages' wikitables and infoboxes."""

    def process(self, source: Tuple[str, Optional[int], Optional[int]]) -> Iterator:
        path, start, end = source
        for item in dump_reader.iter_pages(path, start, end, opener=_open_binary):
            if isinstance(item, dump_reader.DumpError):
                counter(f"dump_errors_{item.reason}").inc()
                logging.warning("%s", item)
                if item.fatal:
                    yield _file_failure(item.path, item.reason, str(item))
                continue
            counter("pages_read").inc()
            progress.report(self._progress_key, pages=1)
            skip = wikitext_tables.page_skip_reason(item)
            if skip:
                counter(f"pages_skipped_{skip}").inc()
                continue
            yield from self._page(item)

    def _page(self, page) -> Iterator[interaction_pb2.Interaction]:
        try:
            tables, rejections = wikitext_tables.extract_page_tables(page)
        except Exception as e:  # pylint: disable=broad-except
            # A page the parser cannot take (or an extractor bug) costs that page only.
            reason = "parse_error" if isinstance(e, wikitext_tables.PageParseError) else "unexpected_error"
            counter(f"pages_failed_{reason}").inc()
            logging.warning("Page %r failed: %s", page.title, e)
            return
        counter("pages_with_tables" if tables else "pages_without_tables").inc()
        yield from _emit(tables, rejections, page.title, self._excluded)


class _ExtractHtmlFn(_ExcludingFn):
    """A rendered page (`N.html[.gz]` with `N.json` beside it) -> Interactions of its tables."""

    def process(self, path: str) -> Iterator:
        counter("pages_read").inc()
        progress.report(self._progress_key, pages=1)
        try:
            page = html_tables.parse_page(path, _read_bytes(path), _read_metadata(path))
            tables, rejections = html_tables.extract_html(page)
        except Exception as e:  # pylint: disable=broad-except
            reason = e.reason if isinstance(e, html_tables.PageError) else "unexpected_error"
            counter(f"pages_failed_{reason}").inc()
            logging.warning("Page %s failed: %s", path, e)
            if reason in PAGE_FILE_REASONS:
                yield _file_failure(getattr(e, "path", path), reason, str(e))
            return
        counter("pages_with_tables" if tables else "pages_without_tables").inc()
        yield from _emit(tables, rejections, page.title, self._excluded)


def _file_failure(path: str, reason: str, message: str) -> pvalue.TaggedOutput:
    counter(f"files_failed_{reason}").inc()
    return pvalue.TaggedOutput(FILE_FAILURES, failure_line(path, reason, message))


def failure_line(path: str, reason: str, message: str) -> str:
    """`path<TAB>reason<TAB>message`, on one line whatever the message holds."""
    return "\t".join(" ".join(str(field).split()) for field in (path, reason, message))


def parse_failure_line(line: str) -> Dict[str, str]:
    path, reason, message = line.rstrip("\n").split("\t", 2)
    return {"path": path, "reason": reason, "message": message}


def write_file_failures(failures, path: Optional[str], label: str) -> None:
    """Writes the `FILE_FAILURES` lines to `path` (one file, empty when nothing failed)."""
    if path:
        _ = failures | f"{label}/WriteFailures" >> beam.io.WriteToText(path, shard_name_template="",
                                                                      num_shards=1)


def _open_binary(path: str):
    """Any path Beam's file systems know (local, gs://, ...), raw bytes (no decompression)."""
    return FileSystems.open(path, compression_type="uncompressed")


def _read_bytes(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def _read_metadata(path: str) -> Optional[bytes]:
    stem = path[:-len(".gz")] if path.endswith(".gz") else path
    json_path = os.path.splitext(stem)[0] + ".json"
    return _read_bytes(json_path) if FileSystems.exists(json_path) else None


def _matched(root, label: str, patterns: Iterable[str]):
    return (root
            | f"{label}/Patterns" >> beam.Create(list(patterns))
            | f"{label}/Match" >> fileio.MatchAll(empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
            | f"{label}/Paths" >> beam.Map(lambda metadata: metadata.path))


class ExtractTables(beam.PTransform):
    """Dump and page file patterns -> Interactions, one per kept table, in the released format.

    Args:
      dump_patterns: globs of `pages-articles` dumps (`.xml`, `.xml.bz2`, multistream too).
      html_patterns: globs of rendered pages (`.html`, `.html.gz`, with `.json` metadata beside).
      exclusions_path: a file of table ids, WTQ/SQA table names or `title:...` lines to leave out.
      streams_per_range: bz2 streams of a multistream dump read by one worker.
      progress_key: a `progress.Progress.key` to report each page read to.
      failures_path: where to write the files that could not be read to their end (see the module's
        docstring); None: counted and logged only.
    """

    def __init__(self, dump_patterns: Iterable[str] = (), html_patterns: Iterable[str] = (),
                 exclusions_path: Optional[str] = None, streams_per_range: int = STREAMS_PER_RANGE,
                 progress_key: Optional[str] = None, failures_path: Optional[str] = None):
        super().__init__()
        self._failures_path = failures_path
        self._streams_per_range = streams_per_range
        self._dumps = list(dump_patterns)
        self._pages = list(html_patterns)
        self._exclusions_path = exclusions_path
        self._progress_key = progress_key

    def expand(self, root):
        outputs = []
        if self._dumps:
            outputs.append(_matched(root, "Dumps", self._dumps)
                           | "Dumps/Split" >> beam.ParDo(_SplitDumpFn(self._streams_per_range))
                           | "Dumps/Spread" >> beam.Reshuffle()
                           | "Dumps/Extract" >> beam.ParDo(_ExtractDumpFn(self._exclusions_path, self._progress_key)
                                                           ).with_outputs(FILE_FAILURES, main="interactions"))
        if self._pages:
            outputs.append(_matched(root, "Pages", self._pages)
                           | "Pages/OnlyPages" >> beam.Filter(lambda p: p.endswith((".html", ".html.gz")))
                           | "Pages/Spread" >> beam.Reshuffle()
                           | "Pages/Extract" >> beam.ParDo(_ExtractHtmlFn(self._exclusions_path, self._progress_key)
                                                           ).with_outputs(FILE_FAILURES, main="interactions"))
        if not outputs:
            raise ValueError("ExtractTables needs dump or page patterns")
        failures = tuple(o[FILE_FAILURES] for o in outputs) | "FileFailures" >> beam.Flatten()
        write_file_failures(failures, self._failures_path, "Extract")
        return tuple(o.interactions for o in outputs) | "Interactions" >> beam.Flatten()


# --- released interactions ----------------------------------------------------------------------


class _ReadInteractionFileFn(beam.DoFn):
    """An interaction file's path -> its Interactions; a line or record that does not parse is
    counted (`interactions_bad_line`) and logged, a file cut short is a file failure."""

    def process(self, path: str) -> Iterator:
        counter("interaction_files_read").inc()
        try:
            for item in interaction_io.read_interactions_counting_lines(path, opener=_open_binary):
                if isinstance(item, interaction_io.InteractionFormatError):
                    counter("interactions_bad_line").inc()
                    logging.warning("Unreadable interaction: %s", item)
                else:
                    yield item
        except interaction_io.InteractionFileError as e:
            logging.warning("%s", e)
            yield _file_failure(e.path, e.reason, str(e))


class ReadInteractionFiles(beam.PTransform):
    """Interaction files -> Interactions: one-line text protos (`.txtpb`, `.txtpb.gz`, as Google
    released its corpus) or TFRecords of binary protos (anything else), each file read whole by one
    worker (a gzip file cannot be split anyway). A line that does not parse is counted
    (`interactions_bad_line`) and skipped; a file that cannot be read to its end is a file failure,
    written to `failures_path` when given (see the module's docstring)."""

    def __init__(self, patterns: Iterable[str], failures_path: Optional[str] = None):
        super().__init__()
        self._patterns = list(patterns)
        self._failures_path = failures_path

    def expand(self, root):
        read = (_matched(root, "InteractionFiles", self._patterns)
                | "Spread" >> beam.Reshuffle()
                | "Read" >> beam.ParDo(_ReadInteractionFileFn()).with_outputs(FILE_FAILURES, main="interactions"))
        write_file_failures(read[FILE_FAILURES], self._failures_path, "ReadInteractions")
        return read.interactions


def write_text_protos(interactions, prefix: str, num_shards: int = 0):
    """Interactions -> one-line text protos, gzipped, as Google's released corpus."""
    return (interactions
            | "ToTextLine" >> beam.Map(lambda i: text_format.MessageToString(i, as_one_line=True))
            | "WriteText" >> beam.io.WriteToText(prefix, file_name_suffix=".txtpb.gz", num_shards=num_shards))


# --- examples -------------------------------------------------------------------------------------


class _ToExamplesFn(beam.DoFn):
    """Interaction -> serialized masked-LM examples, tagged by split (`SPLITS`)."""

    def __init__(self, config: PretrainConfig, progress_key: Optional[str] = None):
        self._config = config
        self._progress_key = progress_key
        self._maker = None

    def setup(self):
        from tapas_tf.features.pretrain_examples import PretrainExampleMaker

        self._maker = PretrainExampleMaker(self._config)

    def process(self, interaction: interaction_pb2.Interaction) -> Iterator:
        counter("interactions_read").inc()
        try:
            number_annotation.add_numeric_values(interaction)
            results = list(self._maker.make(interaction))
        except Exception as e:  # pylint: disable=broad-except
            counter("examples_skipped_unexpected_error").inc(self._config.dupe_factor)
            logging.warning("Interaction %s failed: %s", interaction.id, e)
            return
        split = split_of(interaction.table.table_id or interaction.id, self._config.test_fraction)
        for result in results:
            if isinstance(result, PretrainSkip):
                counter(f"examples_skipped_{result.reason.value}").inc()
                continue
            for name, value in result.stats.items():
                if value:
                    counter(f"limit_{name}").inc(value)
            counter(f"examples_written_{split}").inc()
            progress.report(self._progress_key, examples=1)
            # Deterministic: map fields would otherwise be written in an order that varies by process.
            yield pvalue.TaggedOutput(split, result.to_tf_example().SerializeToString(deterministic=True))


class ToPretrainExamples(beam.PTransform):
    """Interactions -> serialized masked-LM tf.Examples; outputs `train` and `test`.

    Numbers and dates are annotated first (ranks need them). Each interaction gives
    `config.dupe_factor` examples or counted skips, each seeded from its table id, duplicate index
    and `config.random_seed`, so the output does not depend on the runner or worker count.
    `progress_key`: a `progress.Progress.key` to report each example written to.
    """

    def __init__(self, config: PretrainConfig, progress_key: Optional[str] = None):
        super().__init__()
        self._config = config
        self._progress_key = progress_key

    def expand(self, interactions):
        return interactions | "MakeExamples" >> beam.ParDo(
            _ToExamplesFn(self._config, self._progress_key)).with_outputs(*SPLITS)


def progress_counts(interaction: interaction_pb2.Interaction) -> Dict[str, int]:
    """What one interaction adds to the job's progress (`progress.CountItems`)."""
    del interaction  # Each counts once.
    return {"interactions": 1}
