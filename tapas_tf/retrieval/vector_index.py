"""The vector index that dense table retrieval searches: exact, FAISS or ScaNN, behind one facade.

Tables are embedded once (float32 [n, d]); a question's embedding (float32 [d]) is scored against all
of them by inner product, the metric of the TAPAS dense retriever (Herzig et al. 2021: the
question and table towers are projected to d = 256 and compared by dot product, no
normalisation). Three backends, each with `build`, `search`, `save` and `load`:

- `ExactIndex`: NumPy, every score computed; the reference the others are measured against, and
  the fastest choice while the matrix is small (see `EXACT_MAX_VECTORS`).
- `FaissIndex`: FAISS inverted file (IVF) over k-means lists, with the vectors kept as they are
  ("flat"), as 8-bit scalars ("sq8") or as 4-bit fast-scan PQ codes re-ranked on the float vectors
  ("pq_refine"); `nprobe` lists are scanned per query.
- `ScannIndex`: ScaNN, a k-means tree, anisotropic asymmetric hashing (AH) to score the leaves
  searched, then exact re-ordering of the best candidates.

`VectorIndex` maps rows to string ids (table ids), picks the backend ("auto": exact up to
`EXACT_MAX_VECTORS` vectors, `AUTO_APPROXIMATE` above) and saves a directory with
`vector_index.json` (format version, kind, dim, count, metric, params) beside the backend's files.

faiss and scann are imported inside functions, so the exact index (and the rest of
`tapas_tf.retrieval`) works without them and importing this module costs nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any, Sequence

import numpy as np

FORMAT_VERSION = 1
METADATA_FILE = "vector_index.json"
IDS_FILE = "ids.json"
METRIC = "inner_product"
KINDS = ("exact", "faiss", "scann")

# "auto" uses exact search up to this many vectors. Measured by benchmarks/vector_index.py (d 256,
# batch-1 queries, 200 queries; 2-core Xeon with AVX-512 shared with a training job and a test run,
# so pessimistic): exact search's median query took 2.1 ms at 50,000 vectors and 8.6 ms at 100,000
# with one BLAS thread (12.0 and 23.6 ms with two threads, which wait for the cores the other jobs
# hold; 155 ms at 1,000,000 with two), i.e. it passes 5 ms between the two sizes; FAISS answered
# the 100,000 in 0.14 ms at recall@10 0.991 after a 17 s build. Below this size exact search is fast enough and
# needs no build, no training and no recall trade-off.
EXACT_MAX_VECTORS = 50_000
# The approximate library "auto" picks above EXACT_MAX_VECTORS: the benchmark's winner. At
# 1,000,000 vectors (d 256) FAISS IVF-Flat reached recall@10 0.959 at a median 0.49 ms (nprobe 8 of
# 2,000 lists) where ScaNN needed 80 of 1,000 leaves and 1.4 ms for 0.954-0.958; at 100,000 FAISS
# 0.991 at 0.14 ms, ScaNN 0.988 at 0.28 ms. (ScaNN built faster: 116 s against 204 s at 1M.)
AUTO_APPROXIMATE = "faiss"

# Scores of one block of exact search stay under this many float32 (64 MiB), whatever n and q.
_BLOCK_ELEMENTS = 1 << 24
# Queries scored together in exact search; bounds the [q, k] candidate arrays too.
_QUERY_BLOCK = 1024
# Rows checked for NaN / infinity at once (a full np.isfinite of 1M x 256 would be a 256 MB mask).
_CHECK_ROWS = 1 << 16


# --------------------------------------------------------------------------------------------------
# Input checks shared by the backends.


def _as_matrix(x: Any, what: str) -> np.ndarray:
    """`x` as a C-contiguous float32 [n, d] array, or ValueError (not 2-D, empty, NaN/inf).

    No copy is made when `x` already is C-contiguous float32: at a million vectors a copy is a
    gigabyte, so an index keeps a reference and the caller must not write into the array later.
    """
    array = np.asarray(x)
    if array.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array [count, dim], got shape {array.shape}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{what}: empty array (shape {array.shape}); an index needs at least one "
                         "vector of dimension >= 1")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{what} must hold numbers, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    for start in range(0, array.shape[0], _CHECK_ROWS):
        block = array[start:start + _CHECK_ROWS]
        if not np.isfinite(block).all():
            bad = start + int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
            kind = "NaN" if np.isnan(array[bad]).any() else "infinite"
            raise ValueError(f"{what} hold {kind} values (first in row {bad}); inner products with "
                             "them are meaningless")
    return array


def _as_queries(queries: Any, dim: int) -> np.ndarray:
    """Queries as float32 [q, dim]; ValueError when not 2-D, NaN or of another dimension than the index."""
    array = _as_matrix(queries, "queries")
    if array.shape[1] != dim:
        raise ValueError(f"queries have dimension {array.shape[1]} but the index holds vectors of "
                         f"dimension {dim}")
    return array


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _require_files(directory: str, names: Sequence[str]) -> None:
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            raise ValueError(f"{path} is missing: {directory} is not a complete saved vector index")


def _merge_params(defaults: dict[str, Any], given: dict[str, Any], library: str) -> dict[str, Any]:
    """`defaults` updated with `given`; ValueError naming any parameter the library does not have."""
    unknown = set(given) - set(defaults)
    if unknown:
        raise ValueError(f"unknown {library} parameters {sorted(unknown)}; known: {sorted(defaults)}")
    return {**defaults, **given}


def _threads(threads: int | None) -> int:
    return max(1, int(threads or os.cpu_count() or 1))


def _mark_missing(scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row -1 and score -inf wherever a backend found fewer than k results (one convention for all)."""
    rows = rows.astype(np.int64, copy=False)
    scores = scores.astype(np.float32, copy=False)
    missing = (rows < 0) | np.isnan(scores)
    if missing.any():
        rows = np.where(missing, -1, rows)
        scores = np.where(missing, np.float32(-np.inf), scores)
    return scores, rows


# --------------------------------------------------------------------------------------------------
# Exact search.


class ExactIndex:
    """Every inner product, in blocks of rows so memory stays bounded: O(n d) per query.

    `search(queries [q, d], k)` returns (scores [q, min(k, n)] float32, rows [q, min(k, n)] int64),
    best first; of equal scores the lower rows are kept and come first. k larger than n is allowed and returns all n rows
    (so the arrays are [q, n]), because a caller asking for "the best 100" of 40 tables wants the 40.
    """

    kind = "exact"
    FILES = ("embeddings.npy",)

    def __init__(self) -> None:
        self.embeddings: np.ndarray | None = None  # float32 [n, d]
        self.params: dict[str, Any] = {}

    @property
    def count(self) -> int:
        return 0 if self.embeddings is None else int(self.embeddings.shape[0])

    @property
    def dim(self) -> int:
        return 0 if self.embeddings is None else int(self.embeddings.shape[1])

    def build(self, embeddings: Any, **params: Any) -> "ExactIndex":
        """Holds `embeddings` (float32 [n, d]; referenced, not copied, when already float32 C-order)."""
        if params:
            raise ValueError(f"exact search takes no parameters, got {sorted(params)}")
        self.embeddings = _as_matrix(embeddings, "embeddings")
        return self

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores [q, min(k, n)] float32, rows [q, min(k, n)] int64), best first."""
        if self.embeddings is None:
            raise ValueError("the index is empty: build or load it first")
        x = self.embeddings
        q = _as_queries(queries, self.dim)
        k = min(_check_k(k), x.shape[0])
        n_queries = q.shape[0]
        out_scores = np.empty((n_queries, k), np.float32)
        out_rows = np.empty((n_queries, k), np.int64)
        for q_start in range(0, n_queries, _QUERY_BLOCK):
            q_block = q[q_start:q_start + _QUERY_BLOCK]
            scores, rows = self._search_block(q_block, k)
            out_scores[q_start:q_start + len(q_block)] = scores
            out_rows[q_start:q_start + len(q_block)] = rows
        return out_scores, out_rows

    def _search_block(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        x = self.embeddings
        # At batch 1 this is one block of up to 16M rows: one matrix-vector product over the
        # whole matrix, which is what makes exact search memory-bandwidth bound and fast.
        row_block = max(k, _BLOCK_ELEMENTS // len(q))
        best_scores = np.empty((len(q), 0), np.float32)
        best_rows = np.empty((len(q), 0), np.int64)
        for start in range(0, x.shape[0], row_block):
            # x_block @ q.T ([b, q], read as [q, b]): OpenBLAS streams the row-major block with no
            # transpose; up to 40% faster than q @ x_block.T at batch 1 and 8 (d 256, 100k rows,
            # measured on the busy 2-core machine, so noisy).
            scores = (x[start:start + row_block] @ q.T).T  # [q, b]
            rows = np.arange(start, start + scores.shape[1], dtype=np.int64)
            scores, rows = _top_k(scores, np.broadcast_to(rows, scores.shape), k)
            # Merge with the best so far: at most 2k candidates per query, so the merge is cheap.
            best_scores, best_rows = _top_k(np.concatenate([best_scores, scores], axis=1),
                                            np.concatenate([best_rows, rows], axis=1), k)
        # Best first; ties by lower row, so the order is the same whatever the block size.
        order = np.lexsort((best_rows, -best_scores), axis=1)
        return (np.take_along_axis(best_scores, order, axis=1),
                np.take_along_axis(best_rows, order, axis=1))

    def save(self, directory: str) -> None:
        """Writes embeddings.npy (float32 [n, d]) into `directory`."""
        if self.embeddings is None:
            raise ValueError("the index is empty: nothing to save")
        os.makedirs(directory, exist_ok=True)
        np.save(os.path.join(directory, "embeddings.npy"), self.embeddings)

    @classmethod
    def load(cls, directory: str, params: dict[str, Any] | None = None,
             mmap: bool = False) -> "ExactIndex":
        """Reads embeddings.npy; `mmap=True` maps it instead of reading it (for a large index read rarely)."""
        _require_files(directory, cls.FILES)
        index = cls()
        index.embeddings = np.load(os.path.join(directory, "embeddings.npy"),
                                   mmap_mode="r" if mmap else None)
        if index.embeddings.ndim != 2 or index.embeddings.dtype != np.float32:
            raise ValueError(f"{os.path.join(directory, 'embeddings.npy')} is not a float32 [n, d] array")
        return index


def _top_k(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k highest scores per row of [q, m] (unordered) and their rows; all of them when m <= k."""
    if scores.shape[1] <= k:
        return scores, np.ascontiguousarray(rows)
    # argpartition is O(m) where a sort would be O(m log m); the k kept are sorted once at the end.
    part = np.argpartition(scores, scores.shape[1] - k, axis=1)[:, -k:]
    top_scores = np.take_along_axis(scores, part, axis=1)
    top_rows = np.take_along_axis(rows, part, axis=1)
    # Of scores equal at the cut, argpartition keeps an arbitrary subset; keep the lowest rows
    # instead, so that results do not depend on the block sizes. Such ties are rare in float
    # embeddings (duplicated tables), so the few queries that have them are redone one by one.
    threshold = top_scores.min(axis=1, keepdims=True)
    tied_all = np.count_nonzero(scores == threshold, axis=1)
    tied_kept = np.count_nonzero(top_scores == threshold, axis=1)
    for i in np.flatnonzero(tied_all > tied_kept):
        above = np.flatnonzero(scores[i] > threshold[i, 0])
        tied = np.flatnonzero(scores[i] == threshold[i, 0])
        tied = tied[np.argsort(rows[i, tied], kind="stable")[:k - len(above)]]
        keep = np.concatenate([above, tied])
        top_scores[i], top_rows[i] = scores[i, keep], rows[i, keep]
    return top_scores, top_rows


# --------------------------------------------------------------------------------------------------
# FAISS.


class FaissIndex:
    """FAISS IVF with inner product: k-means lists (spherical k-means, which FAISS uses for inner
    product), `nprobe` lists scanned per query.

    Params (`build(embeddings, **params)`; defaults from `default_params(n)`):
      nlist: number of lists (2 sqrt(n), at most n / 39 so k-means has ~39 points per centroid).
      nprobe: lists scanned per query; the recall / latency knob, also settable per search.
      encoding: "flat" (float32 vectors, best recall, n d 4 bytes), "sq8" (8-bit scalars, n d bytes)
        or "pq_refine" (4-bit fast-scan PQ codes of pq_dims_per_code dims each scanned, the best
        `refine_factor` * k re-ranked on the float32 vectors; holds codes and vectors, so more
        memory than flat).
      train_size: vectors k-means trains on (a seeded sample, 64 per list; FAISS alone would take up
        to 256 per list, 512,000 at a million vectors, where 128,000 already made the build 204 s
        on two busy cores in benchmarks/vector_index.py).
      niter: k-means iterations. threads: OpenMP threads (default: all cores; FAISS's setting is
        process-wide). On cores other jobs keep busy, OpenMP's threads wait for each other: training
        the tests' 2,000-vector PQ index took 3.6 s with 2 threads and 0.1 s with 1, so pass
        threads=1 on a shared machine.
    """

    kind = "faiss"
    FILES = ("faiss.index",)

    def __init__(self) -> None:
        self.index = None
        self.params: dict[str, Any] = {}

    @staticmethod
    def default_params(n: int) -> dict[str, Any]:
        nlist = max(1, min(int(round(2 * math.sqrt(n))), n // 39))
        # nprobe: nlist / 128, at least 8 - recall@10 0.965 at 1M (16 of 2,000 lists, 0.8 ms) and
        # 0.995 at 100k (8 of 632) in benchmarks/vector_index.py (4 of 2,000 at 1M gave 0.954).
        nprobe = max(1, min(nlist, max(8, int(round(nlist / 128)))))
        return {"nlist": nlist, "nprobe": nprobe, "encoding": "flat",
                "pq_dims_per_code": 2, "refine_factor": 4, "train_size": min(n, max(64 * nlist, 10_000)),
                "niter": 10, "threads": None, "seed": 0}

    @property
    def count(self) -> int:
        return 0 if self.index is None else int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return 0 if self.index is None else int(self.index.d)

    def build(self, embeddings: Any, **params: Any) -> "FaissIndex":
        import faiss

        x = _as_matrix(embeddings, "embeddings")
        n, d = x.shape
        p = _merge_params(self.default_params(n), params, "FAISS")
        if p["encoding"] not in ("flat", "sq8", "pq_refine"):
            raise ValueError(f"FAISS encoding must be flat, sq8 or pq_refine, got {p['encoding']!r}")
        p["nlist"] = max(1, min(int(p["nlist"]), n))  # k-means cannot make more lists than points
        p["nprobe"] = max(1, min(int(p["nprobe"]), p["nlist"]))
        p["train_size"] = max(p["nlist"], min(int(p["train_size"]), n))
        faiss.omp_set_num_threads(_threads(p["threads"]))
        if p["encoding"] == "pq_refine":
            if d % p["pq_dims_per_code"]:
                raise ValueError(f"pq_refine needs dim ({d}) divisible by pq_dims_per_code "
                                 f"({p['pq_dims_per_code']})")
            description = f"IVF{p['nlist']},PQ{d // p['pq_dims_per_code']}x4fs,RFlat"
        else:
            description = f"IVF{p['nlist']},{'Flat' if p['encoding'] == 'flat' else 'SQ8'}"
        index = faiss.index_factory(d, description, faiss.METRIC_INNER_PRODUCT)
        ivf = faiss.extract_index_ivf(index)
        ivf.cp.niter = int(p["niter"])
        ivf.cp.seed = int(p["seed"])
        rng = np.random.default_rng(p["seed"])
        sample = x if p["train_size"] >= n else x[np.sort(rng.choice(n, p["train_size"], replace=False))]
        index.train(sample)
        # Added in chunks so FAISS's temporary [chunk, nlist] assignment scores stay small.
        for start in range(0, n, 1 << 16):
            index.add(x[start:start + (1 << 16)])
        self.index, self.params = index, p
        self._apply_search_params()
        return self

    def _apply_search_params(self, nprobe: int | None = None) -> None:
        import faiss

        faiss.extract_index_ivf(self.index).nprobe = int(nprobe or self.params["nprobe"])
        if self.params.get("encoding") == "pq_refine":
            self.index.k_factor = float(self.params["refine_factor"])

    def search(self, queries: Any, k: int, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores [q, min(k, n)] float32, rows [q, min(k, n)] int64), best first; row -1 / score -inf
        where the lists scanned held fewer than k vectors. `nprobe` overrides the built value once."""
        import faiss

        if self.index is None:
            raise ValueError("the index is empty: build or load it first")
        q = _as_queries(queries, self.dim)
        k = min(_check_k(k), self.count)
        faiss.omp_set_num_threads(_threads(self.params.get("threads")))
        self._apply_search_params(nprobe)
        try:
            scores, rows = self.index.search(q, k)
        finally:
            if nprobe:
                self._apply_search_params()
        return _mark_missing(scores, rows)

    def save(self, directory: str) -> None:
        import faiss

        if self.index is None:
            raise ValueError("the index is empty: nothing to save")
        os.makedirs(directory, exist_ok=True)
        faiss.write_index(self.index, os.path.join(directory, "faiss.index"))

    @classmethod
    def load(cls, directory: str, params: dict[str, Any] | None = None) -> "FaissIndex":
        """Reads faiss.index; `params` (as saved in vector_index.json) restore nprobe, threads etc."""
        import faiss

        _require_files(directory, cls.FILES)
        index = cls()
        index.index = faiss.read_index(os.path.join(directory, "faiss.index"))
        index.params = dict(params or {})
        index.params.setdefault("nprobe", faiss.extract_index_ivf(index.index).nprobe)
        index._apply_search_params()
        return index


# --------------------------------------------------------------------------------------------------
# ScaNN.


def _import_scann():
    """scann's pybind module, without loading TensorFlow when TensorFlow is not loaded yet.

    `import scann` imports TensorFlow whenever it is installed (for its TF ops, which this module
    does not use): 12 s here against 0.5 s without. A None in sys.modules makes that import raise
    ModuleNotFoundError, which scann's __init__ catches; the placeholder is removed right after, so
    a later `import tensorflow` works as usual. (While it is in place - the import of scann - a
    second thread importing TensorFlow would fail; nothing in tapas-tf does that concurrently.)
    """
    if "tensorflow" in sys.modules or "scann" in sys.modules:
        from scann.scann_ops.py import scann_ops_pybind
        return scann_ops_pybind
    sys.modules["tensorflow"] = None  # type: ignore[assignment]
    try:
        from scann.scann_ops.py import scann_ops_pybind
    finally:
        if "tensorflow" in sys.modules and sys.modules["tensorflow"] is None:
            del sys.modules["tensorflow"]
    return scann_ops_pybind


# Below this many vectors ScaNN scores by brute force: asymmetric hashing trains 16 centres per
# block and refuses fewer training points, and a tree over a few hundred vectors saves nothing.
SCANN_MIN_TREE_VECTORS = 256


class ScannIndex:
    """ScaNN: k-means tree (`num_leaves`, `num_leaves_to_search` per query; spherical k-means unless
    `spherical=False`), anisotropic AH scoring
    (`dimensions_per_block` dims per 4-bit code, `anisotropic_quantization_threshold` 0.2 as ScaNN
    recommends for unit-norm data), then exact re-ordering of the best `reorder` candidates on
    vectors stored as `reorder_dtype` ("float32", "bfloat16" or "int8").

    Params (`build(embeddings, **params)`; defaults from `default_params(n)`); `num_leaves_to_search`
    and `reorder` can also be given per search. `threads` trains the tree and AH and runs batched
    searches; a single query runs on one thread (ScaNN's design: parallelism is across queries).
    ScaNN chooses the leaves of a batch by another code path than those of a single query, so near
    the `num_leaves_to_search` cut the two can differ (1 query in 50 at 8 of 45 leaves, in the
    tests); and its builds are not bit-reproducible (threaded training), unlike FAISS's.
    """

    kind = "scann"
    FILES = ("scann/scann_assets.pbtxt",)

    def __init__(self) -> None:
        self.searcher = None
        self.params: dict[str, Any] = {}
        self._count = 0
        self._dim = 0

    @staticmethod
    def default_params(n: int) -> dict[str, Any]:
        num_leaves = max(1, int(round(math.sqrt(n))))
        # num_leaves / 12 and reorder 200: recall@10 0.958 at 1M (80 of 1,000 leaves) and
        # 0.978-0.988 at 100k (16-32 of 316) in benchmarks/vector_index.py. Spherical k-means for the
        # tree: with ScaNN's default squared-L2 tree, recall@10 stayed at 0.87 at 40 of 316 leaves on
        # the same 100k unit vectors. At least 12 leaves: a small tree's recall varies from process to
        # process (ScaNN's tree training is not seeded), and at 8 of 45 leaves (2,000 vectors) recall@10
        # ranged 0.89-0.98 over fresh processes; such collections are searched exactly by default anyway.
        leaves = max(1, min(num_leaves, max(12, int(round(num_leaves / 12)))))
        return {"num_leaves": num_leaves, "num_leaves_to_search": leaves,
                "training_sample_size": min(n, 100_000), "spherical": True, "dimensions_per_block": 2,
                "anisotropic_quantization_threshold": 0.2, "reorder": 200, "reorder_dtype": "float32",
                "threads": None}

    @property
    def count(self) -> int:
        return self._count

    @property
    def dim(self) -> int:
        return self._dim

    def build(self, embeddings: Any, **params: Any) -> "ScannIndex":
        scann_ops_pybind = _import_scann()
        import scann

        x = _as_matrix(embeddings, "embeddings")
        n, d = x.shape
        p = _merge_params(self.default_params(n), params, "ScaNN")
        dtypes = {"float32": scann.ReorderType.FLOAT32, "bfloat16": scann.ReorderType.BFLOAT16,
                  "int8": scann.ReorderType.INT8}
        if p["reorder_dtype"] not in dtypes:
            raise ValueError(f"ScaNN reorder_dtype must be one of {sorted(dtypes)}, got {p['reorder_dtype']!r}")
        p["num_leaves"] = max(1, min(int(p["num_leaves"]), n))
        p["num_leaves_to_search"] = max(1, min(int(p["num_leaves_to_search"]), p["num_leaves"]))
        p["training_sample_size"] = max(p["num_leaves"], min(int(p["training_sample_size"]), n))
        p["reorder"] = max(1, int(p["reorder"]))
        builder = scann_ops_pybind.builder(x, 10, "dot_product")
        if n < SCANN_MIN_TREE_VECTORS:
            p["brute_force"] = True
            builder = builder.score_brute_force()
        else:
            p["brute_force"] = False
            builder = (builder.tree(num_leaves=p["num_leaves"], num_leaves_to_search=p["num_leaves_to_search"],
                                    training_sample_size=p["training_sample_size"],
                                    spherical=bool(p["spherical"]))
                       .score_ah(p["dimensions_per_block"],
                                 anisotropic_quantization_threshold=p["anisotropic_quantization_threshold"])
                       .reorder(p["reorder"], quantize=dtypes[p["reorder_dtype"]]))
        builder.set_n_training_threads(_threads(p["threads"]))
        self.searcher = builder.build()
        self.searcher.set_num_threads(_threads(p["threads"]))
        self.params, self._count, self._dim = p, n, d
        return self

    def search(self, queries: Any, k: int, num_leaves_to_search: int | None = None,
               reorder: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores [q, min(k, n)] float32, rows [q, min(k, n)] int64), best first; row -1 / score -inf
        where the leaves searched held fewer than k vectors."""
        if self.searcher is None:
            raise ValueError("the index is empty: build or load it first")
        q = _as_queries(queries, self.dim)
        k = min(_check_k(k), self.count)
        if self.params.get("brute_force"):
            leaves, pre_reorder = -1, -1
        else:
            leaves = int(num_leaves_to_search or self.params["num_leaves_to_search"])
            # The re-ordered candidates must cover k, or a large k would come back truncated.
            pre_reorder = max(int(reorder or self.params["reorder"]), k)
        if len(q) == 1:
            rows, scores = self.searcher.search(q[0], k, pre_reorder, leaves)
            rows, scores = np.asarray(rows)[None], np.asarray(scores)[None]
        else:
            rows, scores = self.searcher.search_batched_parallel(q, k, pre_reorder, leaves)
        rows = np.asarray(rows).astype(np.int64)
        scores = np.asarray(scores, np.float32)
        if rows.shape[1] < k:  # ScaNN may return fewer columns than asked for
            pad = k - rows.shape[1]
            rows = np.pad(rows, ((0, 0), (0, pad)), constant_values=-1)
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=np.nan)
        # ScaNN pads missing results with row 0 and a NaN score; _mark_missing keys on the NaN.
        return _mark_missing(scores, rows)

    def save(self, directory: str) -> None:
        """Writes ScaNN's assets into `directory`/scann, with paths relative to it so the directory can move."""
        if self.searcher is None:
            raise ValueError("the index is empty: nothing to save")
        target = os.path.join(directory, "scann")
        os.makedirs(target, exist_ok=True)
        self.searcher.serialize(target, relative_path=True)

    @classmethod
    def load(cls, directory: str, params: dict[str, Any] | None = None,
             dim: int | None = None) -> "ScannIndex":
        scann_ops_pybind = _import_scann()
        _require_files(directory, cls.FILES)
        target = os.path.join(directory, "scann")
        # ScaNN reports a missing asset from deep in C++; name the file here instead.
        with open(os.path.join(target, "scann_assets.pbtxt")) as f:
            assets = re.findall(r'asset_path:\s*"([^"]+)"', f.read())
        _require_files(target, assets)
        index = cls()
        index.searcher = scann_ops_pybind.load_searcher(target)
        index.params = dict(params or {})
        index._count = int(index.searcher.size())
        # The searcher does not report its dimension: take it from the saved float vectors, from
        # the AH projection in its config, or from the caller (the facade passes the saved dim).
        dataset = os.path.join(target, "dataset.npy")
        in_config = re.search(r"input_dim:\s*(\d+)", index.searcher.config())
        if os.path.exists(dataset):
            index._dim = int(np.load(dataset, mmap_mode="r").shape[1])
        elif in_config:
            index._dim = int(in_config.group(1))
        elif dim:
            index._dim = int(dim)
        else:
            raise ValueError(f"{target}: cannot tell the dimension of the saved ScaNN vectors")
        index.searcher.set_num_threads(_threads(index.params.get("threads")))
        return index


_BACKENDS = {"exact": ExactIndex, "faiss": FaissIndex, "scann": ScannIndex}


def _library_version(kind: str) -> str | None:
    try:
        if kind == "faiss":
            import faiss
            return str(faiss.__version__)
        if kind == "scann":
            from importlib.metadata import version
            return version("scann")
    except Exception:  # informational only
        return None
    return None


# --------------------------------------------------------------------------------------------------
# The facade.


class VectorIndex:
    """Table ids and their embeddings behind one of the backends.

    `VectorIndex.build(embeddings [n, d], ids [n], kind)`, then `search(queries [q, d], k)` ->
    q lists of up to k (id, score) pairs, best first. `save(dir)` / `VectorIndex.load(dir)`.
    """

    def __init__(self, backend: ExactIndex | FaissIndex | ScannIndex, ids: list[str]) -> None:
        if len(ids) != backend.count:
            raise ValueError(f"{len(ids)} ids for {backend.count} vectors")
        self.backend = backend
        self.ids = ids

    @property
    def kind(self) -> str:
        return self.backend.kind

    @property
    def dim(self) -> int:
        return self.backend.dim

    @property
    def count(self) -> int:
        return self.backend.count

    @classmethod
    def build(cls, embeddings: Any, ids: Sequence[str], kind: str = "auto", **params: Any) -> "VectorIndex":
        """Indexes `embeddings` (float32 [n, d], row i is `ids[i]`); `params` go to the backend.

        kind "auto" is "exact" for n <= EXACT_MAX_VECTORS and AUTO_APPROXIMATE above.
        ValueError for an empty, non-2-D or NaN matrix, an ids count that differs from n, duplicate
        or non-string ids, or an unknown kind.
        """
        x = _as_matrix(embeddings, "embeddings")
        ids = list(ids)
        if len(ids) != x.shape[0]:
            raise ValueError(f"{len(ids)} ids for {x.shape[0]} embeddings: one id per row is needed")
        if not all(isinstance(i, str) for i in ids):
            raise ValueError("ids must be strings")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            duplicate = next(i for i in ids if i in seen or seen.add(i))
            raise ValueError(f"duplicate id {duplicate!r}: ids must be unique")
        if kind == "auto":
            kind = "exact" if x.shape[0] <= EXACT_MAX_VECTORS else AUTO_APPROXIMATE
        if kind not in _BACKENDS:
            raise ValueError(f"unknown index kind {kind!r}; expected auto or one of {KINDS}")
        return cls(_BACKENDS[kind]().build(x, **params), ids)

    def search(self, queries: Any, k: int) -> list[list[tuple[str, float]]]:
        """For each query of [q, d], up to min(k, n) (id, score) pairs, best first (an approximate
        index may return fewer when the lists / leaves it searched held fewer vectors)."""
        scores, rows = self.backend.search(queries, k)
        return [[(self.ids[r], float(s)) for s, r in zip(score_row, row_row) if r >= 0]
                for score_row, row_row in zip(scores, rows)]

    def save(self, directory: str) -> None:
        """Writes the backend's files, ids.json and, last, vector_index.json.

        The metadata goes last so that a save cut short leaves a directory `load` rejects
        ("vector_index.json is missing") rather than one it half reads.
        """
        os.makedirs(directory, exist_ok=True)
        self.backend.save(directory)
        with open(os.path.join(directory, IDS_FILE), "w") as f:
            json.dump(self.ids, f)
        metadata = {"format_version": FORMAT_VERSION, "kind": self.kind, "dim": self.dim,
                    "count": self.count, "metric": METRIC, "params": self.backend.params,
                    "library_version": _library_version(self.kind)}
        with open(os.path.join(directory, METADATA_FILE), "w") as f:
            json.dump(metadata, f, indent=1)

    @classmethod
    def load(cls, directory: str, kind: str | None = None) -> "VectorIndex":
        """Reads a directory written by `save`. ValueError naming the file when a file is missing,
        the format version is not FORMAT_VERSION, the kind is unknown or not `kind` (when given),
        or dim / count disagree with the saved vectors."""
        meta_path = os.path.join(directory, METADATA_FILE)
        _require_files(directory, [METADATA_FILE])
        try:
            with open(meta_path) as f:
                metadata = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{meta_path} is not valid JSON: {error}") from None
        if not isinstance(metadata, dict):
            raise ValueError(f"{meta_path} does not hold a JSON object")
        version = metadata.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"{meta_path} has format_version {version!r}; this tapas-tf reads "
                             f"version {FORMAT_VERSION} (rebuild the index)")
        saved_kind = metadata.get("kind")
        if saved_kind not in _BACKENDS:
            raise ValueError(f"{meta_path} has kind {saved_kind!r}; expected one of {KINDS}")
        if kind is not None and saved_kind != kind:
            raise ValueError(f"{meta_path} has kind {saved_kind!r} but {kind!r} was asked for")
        if metadata.get("metric") != METRIC:
            raise ValueError(f"{meta_path} has metric {metadata.get('metric')!r}; only {METRIC!r} is supported")
        backend_cls = _BACKENDS[saved_kind]
        _require_files(directory, list(backend_cls.FILES) + [IDS_FILE])
        params = dict(metadata.get("params") or {})
        if saved_kind == "scann":
            backend = backend_cls.load(directory, params, dim=metadata.get("dim"))
        else:
            backend = backend_cls.load(directory, params)
        with open(os.path.join(directory, IDS_FILE)) as f:
            ids = json.load(f)
        for name, saved, actual in (("dim", metadata.get("dim"), backend.dim),
                                    ("count", metadata.get("count"), backend.count),
                                    ("count", metadata.get("count"), len(ids))):
            if saved != actual:
                raise ValueError(f"{meta_path} says {name} {saved!r} but the saved index has {actual}")
        return cls(backend, ids)
