"""The web page's collections of tables: the server's (an index, or a folder or database indexed at
start), and files uploaded together, each indexed for its own session.

    served = load_served_collection(index_dir="my_index")            # or tables="my_tables/"
    app = create_app(qa, collection=served)                           # the page opens in collection mode

    params, body = upload_request([("cities.csv", data), ("rivers.csv", more)])
    POST /api/collection/upload?{params} with `body`                  # a session over those files

The model reads a collection's tables through a `BatchedReader`: `collection_qa` calls the model
itself (`TableQA.answer_encoded`), and a server must hand every model call to its batcher, so that
TensorFlow's traced functions see one caller at a time and concurrent requests share calls. The
k tables of a first question are handed over from a small thread pool at once, and so are
answered in one batch.

Uploaded files are checked one by one against the limits of one table (`web_sessions.load_upload`:
bytes, columns, rows); the files that pass are written to a temporary folder and indexed
(`table_index.build_index`, BM25), and those that do not are counted and named with the reason.
The folder goes when the session does (the least recently used session is dropped first), and at
exit.
"""

import concurrent.futures
import dataclasses
import json
import logging
import os
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tapas_tf.qa.ask_encoding import EncodedQuestion, PreparedTable
from tapas_tf.qa.ask_results import AskResult
from tapas_tf.qa.collection_qa import DEFAULT_K, CollectionQA
from tapas_tf.qa.table_qa import TableQA
from tapas_tf.qa.tables import AskError
from tapas_tf.retrieval.collection import CollectionError, open_collection
from tapas_tf.retrieval.table_index import REPORT_FILE, IndexError_, TableIndex, build_index
from tapas_tf.serving.web_sessions import (
    COLLECTION_SUFFIXES,
    MAX_SKIPPED_SHOWN,
    CollectionInfo,
    WebError,
    WebLimits,
    load_upload,
)

logger = logging.getLogger(__name__)
# Threads that hand a first question's k encodings to the batcher together (they only wait).
READER_THREADS = 32


# --- the model, through the server's batcher --------------------------------------------------------


class BatchedReader:
    """A `TableQA` whose model calls go to `answer_one` (a server's `QuestionBatcher.answer`); the
    rest (its encoder, `encode`, its names) is the wrapped model's. What `CollectionQA` and
    `Conversation` call (`answer_encoded`, `_run`) thus goes through the batcher."""

    def __init__(self, qa: TableQA, answer_one: Callable[[EncodedQuestion], AskResult],
                 pool: concurrent.futures.Executor):
        self._qa = qa
        self._answer_one = answer_one
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self._qa, name)

    def answer_encoded(self, encoded: Sequence[EncodedQuestion]) -> List[AskResult]:
        """The results in order; several are handed over at once, so one batch answers them."""
        if len(encoded) == 1:
            return [self._answer_one(encoded[0])]
        return list(self._pool.map(self._answer_one, encoded))

    def _run(self, encoded: Sequence[EncodedQuestion], batch_size: int = 16) -> List[AskResult]:
        del batch_size  # The batcher makes the batches.
        return self.answer_encoded(encoded)


class SharedCollectionQA(CollectionQA):
    """A `CollectionQA` that the conversations of many sessions share (one per collection): its
    cache of prepared tables is kept under a lock, as requests run on a thread pool. Reading a
    table not yet cached holds the lock too, so two first questions never read the same table
    twice; the model calls are outside it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cache_lock = threading.Lock()

    def prepared_table(self, table_id: str) -> PreparedTable:
        with self._cache_lock:
            return super().prepared_table(table_id)


# --- the server's collection ----------------------------------------------------------------------


@dataclasses.dataclass
class ServedCollection:
    """The collection a server was started with: its index, what the page says of it, and how
    questions are asked (`k`, `method`). `keeps` is the temporary index directory of
    `--tables` (removed at exit)."""

    index: TableIndex
    info: CollectionInfo
    k: int = DEFAULT_K
    method: Optional[str] = None
    keeps: Any = dataclasses.field(default=None, repr=False)


def load_served_collection(index_dir: Optional[str] = None, tables: Optional[str] = None,
                           titles: Optional[str] = None, k: int = DEFAULT_K,
                           method: Optional[str] = None) -> ServedCollection:
    """The index in `index_dir` (`tapas-tf index`), or the collection `tables` (a folder of
    CSV/TSV files, a SQLite file or `sqlite:///FILE`, a database URL; `titles`: a TSV of
    table_id, title) indexed now into a temporary directory, with a log line saying how many tables
    were indexed and skipped.

    Raises:
      ValueError: both or neither given, or `k` below 1.
      IndexError_: no index in `index_dir`, or no readable table in `tables`.
      CollectionError: `tables` or `titles` cannot be opened.
    """
    if bool(index_dir) == bool(tables):
        raise ValueError("give an index directory or a collection of tables, not both" if index_dir
                         else "give an index directory or a collection of tables")
    if titles and not tables:
        raise ValueError("titles go with a collection of tables (--tables); an index has its titles already")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    keeps = None
    if tables:
        keeps = tempfile.TemporaryDirectory(prefix="tapas-tf-serve-index-")
        index_dir = _index_now(tables, titles, keeps.name)
    index = TableIndex.load(index_dir)
    index._method(method)  # pylint: disable=protected-access  # A wrong method fails at start, not on a question.
    return ServedCollection(index, _served_info(index, k, method), k, method, keeps)


def _index_now(tables: str, titles: Optional[str], directory: str) -> str:
    """Indexes the collection `tables` into `directory`; the index directory."""
    collection = open_collection(tables, titles)
    report = build_index(collection, directory, progress=False)
    skipped = report.collection["skipped_by_reason"]
    logger.info("indexed %d tables of %s for this server into %s (BM25)%s", report.tables, tables, directory,
                "; skipped " + ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
                if skipped else "; none skipped")
    return directory


def _served_info(index: TableIndex, k: int, method: Optional[str]) -> CollectionInfo:
    spec = str(index.header.get("spec", index.index_dir))
    path = spec[len("sqlite:///"):] if spec.startswith("sqlite:///") else spec
    name = os.path.basename(os.path.normpath(path)) if "://" not in path else spec
    return CollectionInfo(name=name or spec, source=spec, tables=len(index), method=method or index.default_method,
                          k=k, skipped=int(index.header.get("skipped", 0)),
                          skipped_files=_skipped_in_report(Path(index.index_dir) / REPORT_FILE))


def _skipped_in_report(path: Path) -> Tuple[Dict[str, str], ...]:
    """The first files of an index's report.json that could not be read; () without a report."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple({"name": str(item.get("source", "")), "reason": str(item.get("message", item.get("reason", "")))}
                 for item in report.get("skipped", [])[:MAX_SKIPPED_SHOWN])


# --- files uploaded together ----------------------------------------------------------------------


def upload_request(files: Sequence[Tuple[str, bytes]]) -> Tuple[str, bytes]:
    """(query string, body) of `POST /api/collection/upload` for these (name, bytes) files: the
    body is the files one after the other, the query their names and sizes in order
    (`?name=a.csv&size=120&name=b.csv&size=300`), which is what the page sends."""
    query = urllib.parse.urlencode([pair for name, data in files for pair in (("name", name), ("size", len(data)))])
    return query, b"".join(data for _, data in files)


def split_upload(names: Sequence[str], sizes: Sequence[str], body: bytes, limits: WebLimits
                 ) -> List[Tuple[str, bytes]]:
    """The (name, bytes) files of an upload request (`upload_request`).

    Raises:
      WebError: no file, more files than `limits` allow, or names and sizes that do not describe the body.
    """
    if not names:
        raise WebError("no file was uploaded: choose one or more CSV files")
    if len(names) > limits.max_collection_files:
        raise WebError(f"{len(names):,} files were uploaded; this page takes at most "
                       f"{limits.max_collection_files:,} at once")
    if len(sizes) != len(names) or not all(size.isdigit() for size in sizes):
        raise WebError("the upload must give each file's name and size in bytes (name=...&size=...)")
    if sum(int(size) for size in sizes) != len(body):
        raise WebError(f"the upload's body has {len(body):,} bytes, but its files' sizes add up to "
                       f"{sum(int(size) for size in sizes):,}")
    files, start = [], 0
    for name, size in zip(names, sizes):
        files.append((name, body[start:start + int(size)]))
        start += int(size)
    return files


@dataclasses.dataclass
class UploadedCollection:
    """Files uploaded together, indexed: the index, what the page says of it, and the temporary
    folder that holds the files and the index (`folder.cleanup()`, or dropping it, removes them)."""

    index: TableIndex
    info: CollectionInfo
    folder: tempfile.TemporaryDirectory


def index_uploads(files: Sequence[Tuple[str, bytes]], limits: WebLimits, k: int = DEFAULT_K) -> UploadedCollection:
    """Checks each file as one uploaded table is checked (names .csv, .tsv or .txt), writes those
    that pass to a temporary folder and indexes them; each file that could not be read is counted
    and named with its reason in `info.skipped_files`.

    Raises:
      WebError: no file could be read (each is named), or the files cannot be indexed.
    """
    folder = tempfile.TemporaryDirectory(prefix="tapas-tf-upload-")
    tables_dir, index_dir = Path(folder.name) / "tables", Path(folder.name) / "index"
    tables_dir.mkdir()
    skipped = _write_readable(files, limits, tables_dir)
    if len(skipped) == len(files):
        folder.cleanup()
        raise WebError(f"none of the {len(files)} files could be read: "
                       + "; ".join(item["reason"] for item in skipped))
    try:
        report = build_index(open_collection(str(tables_dir)), index_dir, progress=False)
        index = TableIndex.load(index_dir)
    except (IndexError_, CollectionError) as e:
        folder.cleanup()
        raise WebError("the uploaded files cannot be searched: " + str(e).replace(f"{tables_dir}{os.sep}", "")
                       .replace(str(tables_dir), "the uploaded files")) from None
    # The collection's own reader may refuse what the page's accepted (it reads a file again).
    skipped += [{"name": os.path.basename(item["source"]),
                 "reason": item["message"].replace(f"{tables_dir}{os.sep}", "")}
                for item in report.collection["skipped"]]
    info = CollectionInfo(name=f"{len(files)} uploaded files", source="uploaded files", tables=len(index),
                          method=index.default_method, k=k, uploaded=True, skipped=len(skipped),
                          skipped_files=tuple(skipped[:MAX_SKIPPED_SHOWN]))
    return UploadedCollection(index, info, folder)


def _write_readable(files: Sequence[Tuple[str, bytes]], limits: WebLimits, tables_dir: Path) -> List[Dict[str, str]]:
    """Writes the files that read as tables into `tables_dir`, as uploaded (a .txt as .csv, since a
    collection reads .csv and .tsv files); the others as {"name", "reason"}."""
    skipped, written = [], set()
    for filename, data in files:
        name = os.path.basename(filename or "") or "the upload"
        stem, suffix = os.path.splitext(name)
        target = name if suffix.lower() in (".csv", ".tsv") else f"{stem}.csv"
        try:
            load_upload(data, name, limits, COLLECTION_SUFFIXES)
            if target.lower() in written:
                raise AskError(f"{name}: another of the uploaded files has the name {target}; rename one of them")
        except AskError as e:
            skipped.append({"name": name, "reason": str(e)})
            continue
        written.add(target.lower())
        (tables_dir / target).write_bytes(data)
    return skipped
