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
    dense/           with a dense model: the tables' embeddings (`vector_index.VectorIndex`); the
                     header's "dense" entry names the model directory and its model_id

Methods: "bm25"; with a dense model (`build_index(dense=...)`, `tapas-tf index --dense_model`)
also "dense" (the dual encoder's inner product, `dense.DenseRetriever`) and "hybrid", the
reciprocal-rank fusion (`fusion`) of both rankings' first HYBRID_DEPTH tables, BM25's with weight 1
and the dense one's with `hybrid_dense_weight` (k `hybrid_rrf_k`), both kept in the header. The header's
`methods` list is what a loaded index offers. For BM25 a table is indexed by the text of
`table_text.table_document` (title, header, cells row by row, at most `max_cells` body cells;
what is cut is counted); the dense encoder reads the table itself (`retrieval_features`).
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

from tapas_tf.checkpoints import bundled
from tapas_tf.retrieval.bm25 import BM25Index
from tapas_tf.retrieval.collection import CollectionTable, TableCollection, absolute_spec, open_collection, recorded_spec
from tapas_tf.retrieval.fusion import reciprocal_rank_fusion
from tapas_tf.retrieval.table_text import table_document
from tapas_tf.retrieval.vector_index import VectorIndex

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
DENSE_DIR = "dense"
METHODS = ("bm25", "dense", "hybrid")
# Tables of each ranking that the hybrid fuses: deeper than any k asked, so that a table ranked
# 30th by one method and 2nd by the other can still come first.
HYBRID_DEPTH = 100
# The hybrid's fusion, chosen on WTQ dev and TabFact val together (the best mean recall@10 of a scan of
# weights 0.1-1.0 and k 10-100 with a fine-tuned MiniLM; benchmarks/fusion_weights.py, docs/RESULTS.md).
# A dense model much weaker than BM25 on a kind of question (TabFact's long statements) pulls an
# equal-weight fusion below BM25; 0.7 keeps the dense ranking's gains on WTQ and BM25's on TabFact.
HYBRID_DENSE_WEIGHT = 0.7
HYBRID_RRF_K = 30
# Indexes written before the fusion was recorded fused with equal weights and Cormack et al.'s k.
_UNRECORDED_FUSION = {"dense_weight": 1.0, "rrf_k": 60.0}
# Tables embedded per model call batch while indexing: bounds the features held in memory.
DENSE_CHUNK = 256
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
                max_cells: int = 5000, progress: bool = False, on_table: Optional[Callable[[CollectionTable], None]] = None,
                dense: Any = None, default_method: Optional[str] = None, vector_index_kind: str = "auto",
                embeddings_dir: Optional[str] = None, hybrid_dense_weight: float = HYBRID_DENSE_WEIGHT,
                hybrid_rrf_k: float = HYBRID_RRF_K) -> IndexReport:
    """Reads every table of `collection` once and writes its index into `index_dir`.

    Args:
      collection: the tables (`collection.open_collection`).
      index_dir: the directory to write (created; files of an earlier index are replaced).
      max_cells: body cells per table in its retrieval text (`table_text.table_document`).
      progress: a tqdm bar over the tables.
      on_table: called with each table read (tests and progress reporters).
      dense: a `dense.DenseRetriever` (loaded from its model directory): the tables are embedded
        too, and the index offers "dense" and "hybrid".
      default_method: the method `search` uses when none is asked; default "hybrid" with a dense
        model (the best measured on WTQ and TabFact, docs/RESULTS.md), else "bm25".
      vector_index_kind: the `VectorIndex` backend ("auto": exact search up to 50,000 tables).
      embeddings_dir: shards of the tables' embeddings by the same dense model (`tapas-tf
        encode-tables`, a Beam job): their vectors are used, and only tables the shards lack are
        embedded here (counted, with a warning).
      hybrid_dense_weight: the dense ranking's weight in the hybrid (BM25's is 1); > 0.
      hybrid_rrf_k: the fusion's damping constant; > 0.

    Raises:
      IndexError_: a collection with no readable table, or a default method the index lacks.
    """
    if not (hybrid_dense_weight > 0 and hybrid_rrf_k > 0):
        raise IndexError_(f"the hybrid's dense weight and k must be > 0, got {hybrid_dense_weight} and {hybrid_rrf_k}")
    start = time.perf_counter()
    index_dir = Path(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    documents: list[str] = []  # Each line once: the dense encoder's text.
    sparse_documents: list[str] = []
    cells_dropped = tables_cut = 0
    if embeddings_dir is not None and dense is None:
        raise IndexError_(f"{embeddings_dir}: embedding shards need their dense model too (--dense_model)")
    embeddings = _DenseAccumulator(dense, embeddings_dir) if dense is not None else None
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
            if embeddings is not None:
                embeddings.add(table)
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
    dense_entry = None
    if embeddings is not None:
        dense_entry = embeddings.finish(ids, index_dir / DENSE_DIR, vector_index_kind)
        methods += ["dense", "hybrid"]
    default = default_method or ("hybrid" if dense is not None else "bm25")
    if default not in methods:
        raise IndexError_(f"default method {default!r} is not one of this index's methods ({', '.join(methods)})")
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
        "dense": dense_entry,
        "hybrid": {"dense_weight": float(hybrid_dense_weight), "rrf_k": float(hybrid_rrf_k)} if dense_entry else None,
        "skipped": len(collection_report["skipped"]),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # The header last: a directory with a header is a whole index.
    (index_dir / HEADER_FILE).write_text(json.dumps(header, indent=1, ensure_ascii=False), encoding="utf-8")
    return IndexReport(str(index_dir), len(ids), methods, default, collection_report, cells_dropped, tables_cut,
                       round(time.perf_counter() - start, 3))


class _DenseAccumulator:
    """Embeds the tables of an index pass in chunks, so that only their vectors are kept."""

    def __init__(self, dense: Any, embeddings_dir: Optional[str] = None):
        self.dense = dense
        self.pending: list[tuple[int, Any]] = []  # (row, features) still to embed.
        self.rows: list[Any] = []  # Row i's vector, or None until its chunk is embedded.
        self.from_shards: dict[str, Any] = {}
        self.shards_used = self.embedded_here = 0
        if embeddings_dir is not None:
            from tapas_tf.retrieval.embedding_shards import read_embedding_shards

            try:
                ids, vectors, _ = read_embedding_shards(embeddings_dir, dimension=dense.dimension,
                                                        model_id=dense.model_id)
            except ValueError as e:
                raise IndexError_(str(e)) from None
            self.from_shards = dict(zip(ids, vectors))

    def add(self, table: CollectionTable) -> None:
        vector = self.from_shards.get(table.table_id)
        if vector is not None:
            self.rows.append(vector)
            self.shards_used += 1
            return
        self.rows.append(None)
        self.pending.append((len(self.rows) - 1, self.dense.table_features(table)))
        if len(self.pending) >= DENSE_CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            vectors = self.dense.embed_table_features([features for _, features in self.pending])
            for (row, _), vector in zip(self.pending, vectors):
                self.rows[row] = vector
            self.embedded_here += len(self.pending)
            self.pending = []

    def finish(self, ids: list[str], directory: Path, kind: str) -> dict[str, Any]:
        """Writes the vector index of the tables added (row i = ids[i]); returns the header's entry."""
        import numpy as np

        self._flush()
        if self.from_shards and self.embedded_here:
            log.warning("%d tables are not in the embedding shards; they were embedded now", self.embedded_here)
        index = VectorIndex.build(np.stack(self.rows).astype(np.float32), ids, kind=kind)
        index.save(str(directory))
        cuts = dict(sorted(self.dense.cuts.items()))
        if cuts:
            log.warning("The dense encoder read part of some tables only: %s",
                        ", ".join(f"{name} {count}" for name, count in cuts.items()))
        return {"model_dir": os.path.abspath(self.dense.model_dir), "model_id": self.dense.model_id,
                # The bundled retriever is found in whatever installation reads the index.
                "bundled": bundled.is_bundled_retriever(self.dense.model_dir),
                "dimension": self.dense.dimension, "similarity": self.dense.similarity,
                "vector_index": index.kind, "cuts": cuts, "from_shards": self.shards_used,
                "embedded_here": self.embedded_here}


def _recorded_model_dir(entry: dict[str, Any]) -> str:
    """The dense model an index's header names: this installation's bundled retriever if it was
    the bundled one (the path recorded may be another installation's), else the path recorded."""
    if entry.get("bundled"):
        return bundled.bundled_retriever_dir() or entry["model_dir"]
    return entry["model_dir"]


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
                 spec: Optional[str] = None, vectors: Optional[VectorIndex] = None, dense_model: Optional[str] = None):
        self.index_dir = index_dir
        self.header = header
        self.tables = tables  # One row per table: SEARCH's metadata columns and more, indexed by table_id.
        self._bm25 = bm25
        self._vectors = vectors
        self._dense_model = dense_model
        self._dense: Any = None
        self._collection: Optional[TableCollection] = None
        self._spec = spec or header["spec"]

    @classmethod
    def load(cls, index_dir: str | os.PathLike, spec: Optional[str] = None,
             dense_model: Optional[str] = None) -> "TableIndex":
        """Reads an index written by `build_index`.

        `spec`: where the tables are now, if not where they were indexed (a moved folder, or a
        database URL with its password, which the index does not record). `dense_model`: where the
        dense model is now, if not where it was when indexing (it must be the same model).

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
        vectors = None
        if "dense" in header["methods"]:
            try:
                vectors = VectorIndex.load(str(index_dir / DENSE_DIR))
            except ValueError as e:
                raise IndexError_(f"{index_dir}: its dense index cannot be read: {e}") from None
        return cls(index_dir, header, tables, bm25, spec, vectors, dense_model)

    def __len__(self) -> int:
        return len(self.tables)

    @property
    def methods(self) -> list[str]:
        return list(self.header["methods"])

    @property
    def default_method(self) -> str:
        return self.header["default_method"]

    @property
    def fusion(self) -> dict[str, float]:
        """The hybrid's {"dense_weight", "rrf_k"} (BM25's weight is 1)."""
        return dict(self.header.get("hybrid") or _UNRECORDED_FUSION)

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
        if method == "bm25":
            return self._bm25.search_many(questions, k)
        if method == "dense":
            return self._dense_rankings(questions, k)
        depth = max(k, HYBRID_DEPTH)
        sparse, dense = self._bm25.search_many(questions, depth), self._dense_rankings(questions, depth)
        fusion = self.fusion
        return [reciprocal_rank_fusion([s, d], k=fusion["rrf_k"], weights=[1.0, fusion["dense_weight"]], limit=k)
                for s, d in zip(sparse, dense)]

    @property
    def dense(self) -> Any:
        """The `dense.DenseRetriever` that embedded the tables, loaded on first use.

        Raises:
          IndexError_: the index has no dense method, or its model is missing or is another model
            (another model_id: its question vectors would not match the tables').
        """
        if self._dense is None:
            entry = self.header.get("dense")
            if not entry:
                raise IndexError_(f"{self.index_dir} has no dense index; build it with `tapas-tf index --dense_model`")
            from tapas_tf.retrieval.dense import DenseRetriever

            model_dir = self._dense_model or _recorded_model_dir(entry)
            try:
                dense = DenseRetriever.from_model_dir(model_dir)
            except (ValueError, FileNotFoundError) as e:
                raise IndexError_(f"{self.index_dir}: its dense model cannot be loaded ({e}); pass the model's "
                                  "directory now (--dense_model)") from None
            if dense.model_id != entry["model_id"]:
                raise IndexError_(f"{model_dir} is model {dense.model_id}, but {self.index_dir} was embedded by "
                                  f"model {entry['model_id']}: build the index again with this model")
            self._dense = dense
        return self._dense

    def _dense_rankings(self, questions: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return self._vectors.search(self.dense.embed_questions(list(questions)), k)

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
