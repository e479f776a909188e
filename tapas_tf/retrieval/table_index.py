"""An index of a table collection on disk: build it once, then search it for the tables a question is about.

    >>> from tapas_tf.retrieval.collection import open_collection
    >>> from tapas_tf.retrieval.table_index import TableIndex, build_index
    >>> report = build_index(open_collection("my_tables/"), "my_index/")       # doctest: +SKIP
    >>> index = TableIndex.load("my_index/")                                   # doctest: +SKIP
    >>> index.search("what is the height of torre jaume i?", k=5)             # doctest: +SKIP
       rank             table_id   title                 source  score method
    0     1  csv/204-csv/590.csv     590  /.../csv/204-csv/590.csv  11.93   bm25

The index directory:

    index.json       what the index holds: the collection spec (so a table can be read again,
                     whole, to answer from it), its methods and default method, counts, versions
    tables.jsonl     one line per indexed table: table_id, title, source, rows (indexed), rows_total,
                     rows_truncated, columns, cells_dropped
    report.json      the collection pass: tables read, skipped (each with its reason), cut
    bm25/            the sparse index (`bm25.BM25Index`)

Methods: "bm25" (the dense encoder and the hybrid of both, `fusion`, are the next methods; the
header's `methods` list is what a loaded index offers). A table is indexed by the text of `table_text.table_document`
(title, header, cells row by row, at most `max_cells` body cells; what is cut is counted).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from tapas_tf.retrieval.bm25 import BM25Index
from tapas_tf.retrieval.collection import CollectionTable, TableCollection, absolute_spec, open_collection, recorded_spec
from tapas_tf.retrieval.table_text import table_document

__all__ = [
    "FORMAT_VERSION",
    "IndexError_",
    "IndexReport",
    "SEARCH_COLUMNS",
    "TableIndex",
    "build_index",
]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
HEADER_FILE = "index.json"
TABLES_FILE = "tables.jsonl"
REPORT_FILE = "report.json"
BM25_DIR = "bm25"
METHODS = ("bm25",)
SEARCH_COLUMNS = ["rank", "table_id", "title", "source", "score", "method"]
# Title and header lines repeated in the BM25 text (`table_text.TableDocument.sparse_text`).
HEADING_REPEATS = 3


class IndexError_(ValueError):
    """An index directory that cannot be built or read; the message names it and what to do.

    (Named with a trailing underscore so as not to shadow Python's IndexError.)
    """


@dataclasses.dataclass
class IndexReport:
    """What `build_index` indexed, skipped and cut, and how long it took."""

    index_dir: str
    tables: int
    methods: list[str]
    default_method: str
    collection: dict[str, Any]
    cells_dropped: int
    tables_with_cells_dropped: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _Progress:
    """A tqdm bar over a collection's tables, or nothing; skipped tables move it too (at the end)."""

    def __init__(self, total: int, enabled: bool):
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=total, desc="reading tables", unit="table")

    def step(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self, skipped: int) -> None:
        if self._bar is not None:
            self._bar.set_postfix(skipped=skipped)
            self._bar.update(self._bar.total - self._bar.n)
            self._bar.close()


def _frame_rows(frame: pd.DataFrame) -> Iterable[Sequence[str]]:
    return frame.itertuples(index=False, name=None)


def build_index(collection: TableCollection, index_dir: str | os.PathLike,
                max_cells: int = 5000, progress: bool = False, on_table: Optional[Callable[[CollectionTable], None]] = None) -> IndexReport:
    """Reads every table of `collection` once and writes its index into `index_dir`.

    Args:
      collection: the tables (`collection.open_collection`).
      index_dir: the directory to write (created; files of an earlier index are replaced).
      max_cells: body cells per table in its retrieval text (`table_text.table_document`).
      progress: a tqdm bar over the tables.
      on_table: called with each table read (tests and progress reporters).

    Raises:
      IndexError_: a collection with no readable table.
    """
    start = time.perf_counter()
    index_dir = Path(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    documents: list[str] = []  # Each line once: the dense encoder's text.
    sparse_documents: list[str] = []
    cells_dropped = tables_cut = 0
    bar = _Progress(len(collection), progress)
    with open(index_dir / TABLES_FILE, "w", encoding="utf-8") as tables_out:
        for table in collection:
            bar.step()
            if on_table is not None:
                on_table(table)
            document = table_document(table.title, [str(c) for c in table.frame.columns],
                                      _frame_rows(table.frame), max_cells=max_cells)
            cells_dropped += document.cells_dropped
            tables_cut += document.cells_dropped > 0
            ids.append(table.table_id)
            documents.append(document.text)
            sparse_documents.append(document.sparse_text(HEADING_REPEATS))
            tables_out.write(json.dumps({
                "table_id": table.table_id, "title": table.title, "source": table.source,
                "rows": int(table.frame.shape[0]), "rows_total": table.rows_total,
                "rows_truncated": table.rows_truncated, "columns": int(table.frame.shape[1]),
                "cells_dropped": document.cells_dropped,
            }, ensure_ascii=False) + "\n")
    collection_report = collection.report.as_dict()
    bar.close(len(collection_report["skipped"]))
    (index_dir / REPORT_FILE).write_text(json.dumps(collection_report, indent=1, ensure_ascii=False), encoding="utf-8")
    if not ids:
        raise IndexError_(f"{collection.spec}: no table could be read ({_skipped_summary(collection_report)}); "
                          f"see {index_dir / REPORT_FILE}")
    if cells_dropped:
        log.warning("%d tables are indexed by their first %d cells only (%d cells left out of their retrieval "
                    "text; the tables are read whole when asked)", tables_cut, max_cells, cells_dropped)
    try:
        BM25Index.build(sparse_documents, ids).save(index_dir / BM25_DIR)
    except ValueError as e:  # Every table is stop words alone: BM25 cannot index that.
        raise IndexError_(f"{collection.spec}: {e}") from None
    methods = ["bm25"]
    default = "bm25"
    header = {
        "format": "tapas_tf.retrieval.table_index",
        "format_version": FORMAT_VERSION,
        # A database password is not written down: give the URL again to read tables (`TableIndex.load`).
        "spec": recorded_spec(absolute_spec(collection.spec)),
        "titles": collection.titles_file,
        "patterns": collection.patterns,
        "max_rows": collection.max_rows,
        "max_cells": max_cells,
        "heading_repeats": HEADING_REPEATS,
        "tables": len(ids),
        "methods": methods,
        "default_method": default,
        "skipped": len(collection_report["skipped"]),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # The header last: a directory with a header is a whole index.
    (index_dir / HEADER_FILE).write_text(json.dumps(header, indent=1, ensure_ascii=False), encoding="utf-8")
    return IndexReport(str(index_dir), len(ids), methods, default, collection_report, cells_dropped, tables_cut,
                       round(time.perf_counter() - start, 3))


def _skipped_summary(report: dict[str, Any]) -> str:
    by_reason = report.get("skipped_by_reason") or {}
    if not by_reason:
        return "it lists no table"
    return "skipped: " + ", ".join(f"{count} {reason}" for reason, count in sorted(by_reason.items()))


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise IndexError_(f"{path.parent} has no {path.name}: not an index written by `tapas-tf index` ({what})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise IndexError_(f"{path}: not JSON ({e})") from None


class TableIndex:
    """An index directory, loaded: search it by a question, read its tables back."""

    def __init__(self, index_dir: Path, header: dict[str, Any], tables: pd.DataFrame, bm25: BM25Index,
                 spec: Optional[str] = None):
        self.index_dir = index_dir
        self.header = header
        self.tables = tables  # One row per table: SEARCH's metadata columns and more, indexed by table_id.
        self._bm25 = bm25
        self._collection: Optional[TableCollection] = None
        self._spec = spec or header["spec"]

    @classmethod
    def load(cls, index_dir: str | os.PathLike, spec: Optional[str] = None) -> "TableIndex":
        """Reads an index written by `build_index`.

        `spec`: where the tables are now, if not where they were indexed (a moved folder, or a
        database URL with its password, which the index does not record).

        Raises:
          IndexError_: a directory without an index, of another format version, or with missing files.
        """
        index_dir = Path(index_dir)
        if not index_dir.is_dir():
            raise IndexError_(f"{index_dir}: no such index directory (build one with `tapas-tf index`)")
        header = _read_json(index_dir / HEADER_FILE, "its header")
        if header.get("format_version") != FORMAT_VERSION:
            raise IndexError_(f"{index_dir} has index format version {header.get('format_version')!r}; this "
                              f"tapas-tf reads version {FORMAT_VERSION}: build it again with `tapas-tf index`")
        tables_path = index_dir / TABLES_FILE
        if not tables_path.is_file():
            raise IndexError_(f"{index_dir} has no {TABLES_FILE}: the index is incomplete; build it again")
        tables = pd.read_json(tables_path, lines=True, dtype={"table_id": str, "title": str, "source": str})
        if len(tables) != header["tables"]:
            raise IndexError_(f"{tables_path} lists {len(tables)} tables, {HEADER_FILE} says {header['tables']}")
        tables = tables.set_index("table_id", drop=False)
        unknown = [method for method in header["methods"] if method not in METHODS]
        if unknown:
            raise IndexError_(f"{index_dir} holds the methods {', '.join(unknown)}, which this tapas-tf does not "
                              f"know; it reads {', '.join(METHODS)}")
        bm25 = BM25Index.load(index_dir / BM25_DIR)
        return cls(index_dir, header, tables, bm25, spec)

    def __len__(self) -> int:
        return len(self.tables)

    @property
    def methods(self) -> list[str]:
        return list(self.header["methods"])

    @property
    def default_method(self) -> str:
        return self.header["default_method"]

    def _method(self, method: Optional[str]) -> str:
        method = method or self.default_method
        if method not in METHODS:
            raise ValueError(f"unknown retrieval method {method!r}; one of {', '.join(METHODS)}")
        if method not in self.methods:
            raise ValueError(f"{self.index_dir} has the methods {', '.join(self.methods)}, not {method}")
        return method

    def rankings(self, questions: Sequence[str], k: int, method: Optional[str] = None) -> list[list[tuple[str, float]]]:
        """For each question, the (at most) k best (table_id, score), best first."""
        method = self._method(method)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        return self._bm25.search_many(questions, k)

    def search(self, question: str, k: int = 10, method: Optional[str] = None) -> pd.DataFrame:
        """The k tables that best match `question`, best first: a DataFrame of SEARCH_COLUMNS.

        No row when no table shares a word with a question and the method is BM25 alone.
        """
        method = self._method(method)
        ranking = self.rankings([question], k, method)[0]
        rows = [{"rank": rank, "table_id": table_id, "title": self.tables.at[table_id, "title"],
                 "source": self.tables.at[table_id, "source"], "score": score, "method": method}
                for rank, (table_id, score) in enumerate(ranking, start=1)]
        return pd.DataFrame(rows, columns=SEARCH_COLUMNS)

    @property
    def collection(self) -> TableCollection:
        """The indexed collection, opened again from its spec (to read a table whole)."""
        if self._collection is None:
            header = self.header
            try:
                self._collection = open_collection(self._spec, header.get("titles"), header["max_rows"],
                                                   header.get("patterns"))
            except ValueError as e:
                raise IndexError_(f"{self.index_dir}: the indexed collection cannot be opened now: {e}") from None
        return self._collection

    def read_table(self, table_id: str, max_rows: Optional[int] = None) -> CollectionTable:
        """An indexed table, read again from its source (`max_rows` default: the index's)."""
        if table_id not in self.tables.index:
            raise KeyError(f"{self.index_dir} indexes no table {table_id!r}")
        return self.collection.read_table(table_id, max_rows)
