"""BM25 over table documents: find the tables a question shares the most informative words with.

    >>> from tapas_tf.retrieval.bm25 import BM25Index
    >>> index = BM25Index.build(
    ...     ["Aerial lift pylons\\nName Height\\nTorre Jaume I 107 m",
    ...      "Shooting at the 1988 Olympics\\nNation Gold\\nSoviet Union 3"],
    ...     ids=["pylons", "shooting"])
    >>> [table_id for table_id, _ in index.search("height of torre jaume i?", k=5)]
    ['pylons']
    >>> index.search("what is the", k=5)   # only stop words and unseen words: no evidence
    []
    >>> index.save("/tmp/bm25_doctest")
    >>> BM25Index.load("/tmp/bm25_doctest").search("1988 gold", k=1)[0][0]
    'shooting'

Scoring is the `bm25s` library's (chosen over `rank_bm25` by `benchmarks/bm25_libraries.py`:
faster to index and to query, and equal to a plain reference implementation), in its "lucene"
variant with k1 = 1.2, b = 0.75, Lucene's defaults:

    score(q, d) = sum over query words t of  idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

tf is t's count in d, |d| d's length in tokens, avgdl the mean length, N the number of
documents and df(t) how many contain t. This is Lucene's BM25Similarity since Lucene 8, which
dropped the classic constant factor (k1 + 1) from the numerator: the scores are the classic ones
divided by 2.2, the ranking the same. A word repeated in the query counts once per occurrence.
This idf is never negative, so a score is > 0 exactly when a document shares a word with the
query; documents scoring 0 are never returned.

Documents and queries go through the one `tokenize` below. The index directory records the
tokenizer's version and stop words; `load` refuses an index built with another tokenisation, since
its queries would silently stop matching its documents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import logging

import bm25s
import numpy as np
import Stemmer

# bm25s sets its own logger to DEBUG when imported, so every build would print "Building index
# from tokens" through the root handler; its warnings still pass.
logging.getLogger("bm25s").setLevel(logging.WARNING)

__all__ = [
    "B",
    "FORMAT_VERSION",
    "K1",
    "STOP_WORDS",
    "TOKENIZER_VERSION",
    "BM25Index",
    "IndexFormatError",
    "tokenize",
]

K1 = 1.2
B = 0.75
METHOD = "lucene"

# Bump when the files `save` writes change meaning; `load` refuses any other version.
FORMAT_VERSION = 1
# Bump when `tokenize` changes what it returns for any text.
TOKENIZER_VERSION = 2
# Snowball's English (Porter 2) stemmer, as Lucene's EnglishAnalyzer stems: on the training questions
# of WTQ and TabFact it lifted recall@1 by 0.01 (benchmarks in docs/RESULTS.md).
_STEMMER = Stemmer.Stemmer("english")

HEADER_FILE = "bm25_index.json"
IDS_FILE = "ids.json"
LIBRARY_DIR = "bm25s"
# The files bm25s.BM25.save writes (with its default names) and BM25.load reads.
LIBRARY_FILES = (
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "vocab.index.json",
    "params.index.json",
)

# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, also bm25s's STOPWORDS_EN),
# written out here so that a library upgrade cannot change the tokenisation of saved indices.
# Short on purpose: words such as "which", "first" or "total" can tell tables apart.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)

# A number, with thousands separators ("1,234" but not "1,2345") and decimals, or a run of
# letters. Numbers and letters are split apart so "107m", "107 m" and "107" all give "107".
_TOKEN = re.compile(r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|[^\W\d_]+")


class IndexFormatError(ValueError):
    """A saved index directory that cannot be loaded: missing files, or another format."""


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed words and numbers of `text`, stop words dropped; numbers lose their commas.

    >>> tokenize("The 1,234 pylons of Torre Jaume I are 3.5m high")
    ['1234', 'pylon', 'torr', 'jaum', 'i', '3.5', 'm', 'high']
    """
    tokens = (match.replace(",", "") for match in _TOKEN.findall(text.lower()))
    return _STEMMER.stemWords([token for token in tokens if token not in STOP_WORDS])


def _tokenizer_settings() -> dict:
    """What the header records of the tokenisation, compared on load."""
    return {
        "version": TOKENIZER_VERSION,
        "lowercase": True,
        "pattern": _TOKEN.pattern,
        "numbers": "thousands commas stripped",
        "stemmer": "snowball english",
        "stop_words": sorted(STOP_WORDS),
    }


class BM25Index:
    """A BM25 index of documents, each known by a string id. Build it with `build` or `load`."""

    def __init__(self, retriever: bm25s.BM25, ids: Sequence[str]):
        self._retriever = retriever
        self._ids = list(ids)

    @classmethod
    def build(cls, documents: Sequence[str], ids: Sequence[str]) -> BM25Index:
        """Index `documents` (texts, e.g. `table_document(...).text`), `ids[i]` naming documents[i]."""
        ids = list(ids)
        if len(documents) != len(ids):
            raise ValueError(f"{len(documents)} documents but {len(ids)} ids")
        if not ids:
            raise ValueError("cannot build a BM25 index of no documents")
        _check_unique(ids)
        tokens = [tokenize(text) for text in documents]
        if not any(tokens):
            # bm25s cannot index an empty vocabulary; and such an index could never match.
            raise ValueError(f"none of the {len(tokens)} documents has a word that is not a stop word")
        retriever = bm25s.BM25(k1=K1, b=B, method=METHOD)
        # Our own tokens, not bm25s.tokenize: its pattern drops one-letter words and splits "3.5".
        retriever.index(tokens, show_progress=False)
        return cls(retriever, ids)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The (at most) `k` best documents for `query` as (id, score), best first.

        Only documents sharing a word with the query are returned, so a query of stop words or
        of words no document has gives []. Equal scores are ordered by position in the corpus.
        """
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        vocab = self._retriever.vocab_dict
        token_ids = [vocab[token] for token in tokenize(query) if token in vocab]
        if not token_ids or k == 0:
            return []
        scores = self._retriever.get_scores_from_ids(token_ids)
        return [(self._ids[i], float(scores[i])) for i in _top_k(scores, k)]

    def search_many(self, queries: Iterable[str], k: int) -> list[list[tuple[str, float]]]:
        """`search` for each query, in order."""
        return [self.search(query, k) for query in queries]

    def save(self, directory: str | Path) -> None:
        """Write the index into `directory` (created if needed): a JSON header, the ids, bm25s's files."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._retriever.save(directory / LIBRARY_DIR, show_progress=False)
        (directory / IDS_FILE).write_text(json.dumps(self._ids, ensure_ascii=False), encoding="utf-8")
        # The header last: a directory with a header has all its files.
        header = {
            "format": "tapas_tf.retrieval.bm25",
            "format_version": FORMAT_VERSION,
            "library": "bm25s",
            "library_version": bm25s.__version__,
            "method": METHOD,
            "k1": K1,
            "b": B,
            "documents": len(self._ids),
            "tokenizer": _tokenizer_settings(),
        }
        (directory / HEADER_FILE).write_text(json.dumps(header, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, mmap: bool = False) -> BM25Index:
        """Read an index written by `save`; `mmap=True` maps the score arrays instead of reading them.

        Raises IndexFormatError when a file is missing, or the directory holds another format
        version or another tokenisation.
        """
        directory = Path(directory)
        header = _read_header(directory)
        missing = [name for name in (IDS_FILE, *(f"{LIBRARY_DIR}/{f}" for f in LIBRARY_FILES))
                   if not (directory / name).is_file()]
        if missing:
            raise IndexFormatError(f"BM25 index {directory} is missing {', '.join(missing)}")
        ids = json.loads((directory / IDS_FILE).read_text(encoding="utf-8"))
        if len(ids) != header.get("documents"):
            raise IndexFormatError(
                f"BM25 index {directory}: {IDS_FILE} has {len(ids)} ids, the header says {header.get('documents')}"
            )
        retriever = bm25s.BM25.load(directory / LIBRARY_DIR, mmap=mmap, show_progress=False)
        if retriever.scores["num_docs"] != len(ids):
            raise IndexFormatError(
                f"BM25 index {directory}: the bm25s files hold {retriever.scores['num_docs']} documents, "
                f"{IDS_FILE} {len(ids)}"
            )
        return cls(retriever, ids)


def _read_header(directory: Path) -> dict:
    path = directory / HEADER_FILE
    if not path.is_file():
        raise IndexFormatError(f"BM25 index {directory} has no {HEADER_FILE}: not an index written by BM25Index.save")
    try:
        header = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise IndexFormatError(f"BM25 index {directory}: {HEADER_FILE} is not JSON ({error})") from error
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"BM25 index {directory} has format version {version!r}; this code reads version {FORMAT_VERSION}: rebuild it"
        )
    tokenizer = header.get("tokenizer")
    if tokenizer != _tokenizer_settings():
        saved = tokenizer.get("version") if isinstance(tokenizer, dict) else None
        raise IndexFormatError(
            f"BM25 index {directory} was built with another tokenisation "
            f"(tokenizer version {saved!r}, this code's {TOKENIZER_VERSION}): rebuild it"
        )
    return header


def _check_unique(ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for table_id in ids:
        if table_id in seen:
            raise ValueError(f"duplicate document id {table_id!r}")
        seen.add(table_id)


def _top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k highest positive scores, best first, ties by index (deterministic)."""
    matched = np.flatnonzero(scores > 0)
    if len(matched) > k:
        # The k-th best score; keep everything at least that good, so ties are cut by index below.
        threshold = np.partition(scores[matched], len(matched) - k)[len(matched) - k]
        matched = matched[scores[matched] >= threshold]
    # lexsort: last key first; -score descending, then index ascending.
    order = np.lexsort((matched, -scores[matched]))
    return matched[order][:k].tolist()
