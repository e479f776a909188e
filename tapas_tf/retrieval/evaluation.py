"""Scoring an index on questions whose table is known: recall@k and MRR for each method.

    queries = read_queries("wtq_dev_queries.tsv")     # columns id, question, table_id
    evaluate_index(TableIndex.load("wtq_index"), queries)
    # {"default": "hybrid", "methods": {"bm25": {"recall@1": ..., "mrr": ..., "queries": 2831}, ...},
    #  "gold_not_indexed": 0}
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Optional

from tapas_tf.data.question_files import read_questions
from tapas_tf.retrieval.metrics import DEFAULT_KS, retrieval_report
from tapas_tf.retrieval.table_index import TableIndex

__all__ = ["evaluate_index", "read_queries"]

log = logging.getLogger(__name__)


def read_queries(path: str) -> list[dict[str, str]]:
    """The rows of a queries TSV (columns id, question and table_id); errors name the file and line."""
    return read_questions(path, columns=("id", "question", "table_id"))


def evaluate_index(index: TableIndex, queries: Sequence[dict[str, str]], methods: Optional[Sequence[str]] = None,
                   ks: Sequence[int] = DEFAULT_KS, batch_size: int = 256) -> dict[str, Any]:
    """{"default", "methods": {method: {"recall@k"..., "mrr", "queries"}}, "gold_not_indexed"}.

    Each method ranks max(ks) tables per question (so MRR is MRR@max(ks)). Questions whose gold
    table the index does not hold are kept (as misses) and counted, with a warning: a collection
    that lacks them is part of what is measured.
    """
    if not queries:
        raise ValueError("no queries to score")
    methods = list(methods or index.methods)
    depth = max(ks)
    questions = [query["question"] for query in queries]
    gold = [query["table_id"] for query in queries]
    not_indexed = sum(table_id not in index.tables.index for table_id in gold)
    if not_indexed:
        log.warning("%d of %d queries name a table the index does not hold; they count as misses",
                    not_indexed, len(queries))
    rankings = {}
    for method in methods:
        ranked: list[list[str]] = []
        for start in range(0, len(questions), batch_size):
            batch = index.rankings(questions[start:start + batch_size], depth, method)
            ranked.extend([table_id for table_id, _ in ranking] for ranking in batch)
        rankings[method] = ranked
    return {"default": index.default_method, "methods": retrieval_report(rankings, gold, ks),
            "gold_not_indexed": not_indexed}
