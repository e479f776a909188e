"""Which BM25 library `tapas_tf.retrieval.bm25` uses: bm25s and rank_bm25 against a plain reference.

    .venv/bin/pip install bm25s==0.3.16 rank-bm25==0.2.2   # rank_bm25 only for this comparison
    .venv/bin/python benchmarks/bm25_libraries.py [--docs=20000] [--queries=200] [--output=bm25.json]

One synthetic corpus (seeded): `--docs` documents of 20 to 200 words drawn from a Zipf
distribution over `--vocab` made-up words plus the 33 stop words, and `--queries` queries of 2 to 5
words from the same distribution. Every implementation gets the same tokens
(`tapas_tf.retrieval.bm25.tokenize`), so only the scoring differs. The reference is BM25 written
out here in NumPy / SciPy sparse, float64: k1 1.2, b 0.75,
idf = log(1 + (N - df + 0.5) / (df + 0.5)), term weight idf * tf / (tf + k1 (1 - b + b dl / avgdl))
(Lucene >= 8; the classic numerator's constant (k1 + 1) changes no ranking).

Reported per implementation: index time (tokens given), median query time over the queries
(single-query calls, top 10), how many queries' top 10 equal the reference's exactly, how many
equal it up to ties (each rank holds a document with the reference's score at that rank), and the
largest relative score difference on the returned documents.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import scipy.sparse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import machine, machine_line  # noqa: E402  (benchmarks/machine.py)

from tapas_tf.retrieval.bm25 import B, K1, STOP_WORDS, BM25Index, tokenize  # noqa: E402

TOP = 10


def synthetic_corpus(n_docs: int, n_vocab: int, n_queries: int, seed: int):
    """(documents, queries) as texts: Zipf-distributed words, stop words among the most frequent."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: list[str] = []
    seen = set(STOP_WORDS)
    while len(words) < n_vocab:
        word = "".join(rng.choice(letters, size=rng.integers(3, 9)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    # Stop words interleaved with the commonest words, as in English text.
    vocab = np.array([w for pair in zip(sorted(STOP_WORDS), words) for w in pair] + words[len(STOP_WORDS):])
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.07
    weights /= weights.sum()

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(vocab, size=rng.integers(low, high + 1), p=weights))

    return [text(20, 200) for _ in range(n_docs)], [text(2, 5) for _ in range(n_queries)]


class Reference:
    """BM25 in NumPy / SciPy sparse: a documents x terms matrix of precomputed term weights."""

    def __init__(self, corpus_tokens: list[list[str]], k1: float = K1, b: float = B):
        self.vocab: dict[str, int] = {}
        rows, cols = [], []
        for d, tokens in enumerate(corpus_tokens):
            for token in tokens:
                cols.append(self.vocab.setdefault(token, len(self.vocab)))
                rows.append(d)
        n = len(corpus_tokens)
        tf = scipy.sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(self.vocab)))
        tf.sum_duplicates()  # counts per (document, term)
        dl = np.asarray(tf.sum(axis=1)).ravel()
        df = np.bincount(tf.indices, minlength=len(self.vocab))
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * dl / dl.mean())
        weights = tf.copy()
        doc_of_entry = np.repeat(np.arange(n), np.diff(tf.indptr))
        weights.data = idf[tf.indices] * tf.data / (tf.data + norm[doc_of_entry])
        self.weights = weights.tocsc()

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        ids = [self.vocab[t] for t in query_tokens if t in self.vocab]  # repeats count again
        counts = np.bincount(ids, minlength=len(self.vocab)).astype(float)
        return self.weights @ counts


def _rank_bm25_lucene_idf(base):
    """rank_bm25's BM25Okapi with the reference's idf instead of its own (which floors negatives)."""

    class LuceneIdf(base):
        def _calc_idf(self, nd):
            self.idf = {w: math.log(1 + (self.corpus_size - f + 0.5) / (f + 0.5)) for w, f in nd.items()}

    return LuceneIdf


def implementations(corpus_tokens, documents):
    """name -> (build() -> object, top10(object, tokens, text) -> (indices, scores))."""
    import bm25s
    import rank_bm25

    ids = [str(i) for i in range(len(documents))]

    def bm25s_build():
        retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
        retriever.index(corpus_tokens, show_progress=False)
        return retriever

    def bm25s_top(retriever, tokens, _text):
        docs, scores = retriever.retrieve([tokens], k=TOP, show_progress=False)
        return docs[0], scores[0]

    def rank_top(model, tokens, _text):
        scores = model.get_scores(tokens)
        top = np.argsort(-scores, kind="stable")[:TOP]
        return top, scores[top]

    def ours_top(index, _tokens, text):
        hits = index.search(text, TOP)
        return np.array([int(i) for i, _ in hits], dtype=int), np.array([s for _, s in hits])

    return {
        f"bm25s {bm25s.__version__} (method=lucene)": (bm25s_build, bm25s_top),
        "rank_bm25 0.2.2 BM25Okapi": (lambda: rank_bm25.BM25Okapi(corpus_tokens, k1=K1, b=B), rank_top),
        "rank_bm25 0.2.2 BM25Okapi, Lucene idf": (
            lambda: _rank_bm25_lucene_idf(rank_bm25.BM25Okapi)(corpus_tokens, k1=K1, b=B), rank_top),
        "tapas_tf BM25Index (bm25s; tokenises inside)": (lambda: BM25Index.build(documents, ids), ours_top),
    }


def compare(found, found_scores, ref_scores) -> tuple[bool, bool, float]:
    """(exact top-10 equal, equal up to ties, max relative score difference) for one query."""
    ref_top = np.lexsort((np.arange(len(ref_scores)), -ref_scores))[:TOP]
    ref_top = ref_top[ref_scores[ref_top] > 0]  # a query may match fewer than 10 documents
    found = np.asarray(found)[: len(ref_top)]
    found_scores = np.asarray(found_scores, dtype=float)[: len(ref_top)]
    exact = np.array_equal(found, ref_top)
    tied = len(found) == len(ref_top) and np.allclose(ref_scores[found], ref_scores[ref_top], rtol=1e-5, atol=0)
    rel = np.abs(found_scores - ref_scores[found]) / np.maximum(ref_scores[found], 1e-12)
    return exact, tied, float(rel.max(initial=0.0))


def run(args) -> dict:
    documents, queries = synthetic_corpus(args.docs, args.vocab, args.queries, args.seed)
    start = time.perf_counter()
    corpus_tokens = [tokenize(text) for text in documents]
    tokenize_s = time.perf_counter() - start
    query_tokens = [tokenize(q) for q in queries]

    start = time.perf_counter()
    reference = Reference(corpus_tokens)
    results = {"reference (NumPy/SciPy)": {"index_s": time.perf_counter() - start}}
    ref_scores = [reference.scores(tokens) for tokens in query_tokens]
    times = []
    for tokens in query_tokens:
        start = time.perf_counter()
        scores = reference.scores(tokens)
        np.argpartition(-scores, TOP)[:TOP]
        times.append(time.perf_counter() - start)
    results["reference (NumPy/SciPy)"]["query_ms"] = 1000 * statistics.median(times)

    for name, (build, top) in implementations(corpus_tokens, documents).items():
        print(f"# {name} ...", file=sys.stderr)
        start = time.perf_counter()
        model = build()
        index_s = time.perf_counter() - start
        times, exact, tied, max_rel = [], 0, 0, 0.0
        for tokens, text, ref in zip(query_tokens, queries, ref_scores):
            start = time.perf_counter()
            found, scores = top(model, tokens, text)
            times.append(time.perf_counter() - start)
            e, t, r = compare(found, scores, ref)
            exact, tied, max_rel = exact + e, tied + t, max(max_rel, r)
        results[name] = {"index_s": index_s, "query_ms": 1000 * statistics.median(times),
                         "top10_exact": exact, "top10_up_to_ties": tied, "max_rel_score_diff": max_rel}
    return {"machine": machine(), "docs": args.docs, "vocab": args.vocab, "queries": args.queries,
            "seed": args.seed, "tokenize_s": tokenize_s,
            "tokens": sum(map(len, corpus_tokens)), "results": results}


def print_report(report: dict) -> None:
    n = report["queries"]
    print(f"Machine: {machine_line(report['machine'])}")
    print(f"{report['docs']} documents ({report['tokens']} tokens after stop words; tokenised in "
          f"{report['tokenize_s']:.1f} s), vocabulary {report['vocab']}, {n} queries, seed {report['seed']}\n")
    print(f"| {'implementation':<52} | index s | query ms (median) | top-10 = reference | up to ties | max rel. score diff |")
    print(f"|{'-' * 54}|---------|-------------------|--------------------|------------|---------------------|")
    for name, r in report["results"].items():
        same = f"{r['top10_exact']}/{n}" if "top10_exact" in r else "-"
        ties = f"{r['top10_up_to_ties']}/{n}" if "top10_up_to_ties" in r else "-"
        diff = f"{r['max_rel_score_diff']:.1e}" if "max_rel_score_diff" in r else "-"
        print(f"| {name:<52} | {r['index_s']:7.2f} | {r['query_ms']:17.2f} | {same:>18} | {ties:>10} | {diff:>19} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--vocab", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", help="also write the report as JSON here")
    args = parser.parse_args(argv)
    report = run(args)
    print_report(report)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
