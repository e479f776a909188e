"""Choosing the hybrid's fusion: reciprocal-rank fusion's dense weight and k, scanned on dev queries.

    .venv/bin/python benchmarks/fusion_weights.py --index_dir=IDX --queries=dev_queries.tsv \
        --dense_weights=0.2,0.3,0.5,0.7,1.0 --rrf_ks=10,30,60 [--output=scan.json]

Ranks every query once with BM25 and once with the dense model (HYBRID_DEPTH tables each), then
fuses those rankings under each setting, so the scan costs one pass of each method. Prints one
JSON line per setting (recall@1/10/50, MRR) and, last, the setting with the best recall@10 (ties:
recall@1). The BM25 weight is 1; `dense_weight` is the dense ranking's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from tapas_tf.retrieval.evaluation import read_queries
from tapas_tf.retrieval.fusion import reciprocal_rank_fusion
from tapas_tf.retrieval.metrics import retrieval_report
from tapas_tf.retrieval.table_index import HYBRID_DEPTH, TableIndex

KS = (1, 10, 50)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index_dir", required=True)
    parser.add_argument("--queries", required=True, help="TSV of id, question, table_id")
    parser.add_argument("--dense_weights", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1.0")
    parser.add_argument("--rrf_ks", default="10,30,60,100")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--output", help="also write every line to this JSON file")
    args = parser.parse_args(argv)
    index = TableIndex.load(args.index_dir)
    if "dense" not in index.methods:
        parser.error(f"{args.index_dir} has no dense method (build it with --dense_model)")
    queries = read_queries(args.queries)
    questions = [q["question"] for q in queries]
    gold = [q["table_id"] for q in queries]
    sparse, dense = [], []
    for start in range(0, len(questions), args.batch_size):
        batch = questions[start:start + args.batch_size]
        sparse.extend(index.rankings(batch, HYBRID_DEPTH, "bm25"))
        dense.extend(index.rankings(batch, HYBRID_DEPTH, "dense"))
    lines = []
    for name, ranked in (("bm25", sparse), ("dense", dense)):
        lines.append({"method": name, **retrieval_report({name: [[t for t, _ in r] for r in ranked]}, gold, KS)[name]})
    weights = [float(w) for w in args.dense_weights.split(",")]
    ks = [float(k) for k in args.rrf_ks.split(",")]
    for weight, k in itertools.product(weights, ks):
        fused = [[t for t, _ in reciprocal_rank_fusion([s, d], k=k, weights=[1.0, weight], limit=max(KS))]
                 for s, d in zip(sparse, dense)]
        lines.append({"method": "hybrid", "dense_weight": weight, "rrf_k": k,
                      **retrieval_report({"hybrid": fused}, gold, KS)["hybrid"]})
    for line in lines:
        print(json.dumps(line))
    best = max((line for line in lines if line["method"] == "hybrid"),
               key=lambda line: (line["recall@10"], line["recall@1"]))
    print(json.dumps({"best": best}))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(lines, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
