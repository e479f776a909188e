"""Training data of a dense retriever: (question, its table, a hard negative table), as arrays.

    >>> data = build_training_data(retriever.features, [("wtq", collection, queries)])   # doctest: +SKIP
    >>> data.save("pairs.npz"); RetrieverTrainingData.load("pairs.npz")                  # doctest: +SKIP

Each source is a collection with training questions whose table is known (`evaluation.read_queries`:
id, question, table_id). Only the tables those questions name are read (the data rule: a retriever
trains on the tables of training splits only), and hard negatives are mined among them: BM25 over
the same tables, the best-ranked table that is not the question's own (Karpukhin et al., 2020; DTR,
Herzig et al., 2021). A question with no such table has no hard negative and gets in-batch
negatives only (`negative` -1). Table ids are prefixed with the source's name, so that two sources
can share an id without meaning one table.

Questions whose table the collection lacks, or whose table cannot be converted, are skipped and
counted by reason in `report`.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from tapas_tf.features.retrieval_features import TABLE_INPUT_FEATURES, ConversionError, RetrievalFeatures
from tapas_tf.retrieval.bm25 import BM25Index
from tapas_tf.retrieval.collection import TableCollection, table_to_interaction_table
from tapas_tf.retrieval.table_text import table_document

__all__ = ["RetrieverTrainingData", "build_training_data"]

log = logging.getLogger(__name__)

# BM25 ranks searched for a hard negative.
NEGATIVE_DEPTH = 10
# The BM25 text's title and header repeats (as the index's).
_HEADING_REPEATS = 3


@dataclasses.dataclass
class RetrieverTrainingData:
    """Arrays for `training.retriever_training`.

    Attributes:
      question_ids, question_mask: <int32>[num_questions, max_query_length].
      gold: <int32>[num_questions], the row of each question's table.
      negative: <int32>[num_questions], the row of its hard negative, -1 for none.
      tables: TABLE_INPUT_FEATURES -> <int32>[num_tables, max_table_length].
      table_ids: <str>[num_tables], "SOURCE:TABLE_ID".
      report: what was read, kept and skipped.
    """

    question_ids: np.ndarray
    question_mask: np.ndarray
    gold: np.ndarray
    negative: np.ndarray
    tables: dict[str, np.ndarray]
    table_ids: np.ndarray
    report: dict[str, Any]

    def __len__(self) -> int:
        return int(self.gold.shape[0])

    def save(self, path: str) -> None:
        import json

        np.savez_compressed(path, question_ids=self.question_ids, question_mask=self.question_mask, gold=self.gold,
                            negative=self.negative, table_ids=self.table_ids,
                            report=np.array(json.dumps(self.report)),
                            **{f"table_{name}": value for name, value in self.tables.items()})

    @classmethod
    def load(cls, path: str) -> "RetrieverTrainingData":
        import json

        try:
            with np.load(path, allow_pickle=False) as data:
                tables = {name: data[f"table_{name}"] for name in TABLE_INPUT_FEATURES}
                return cls(data["question_ids"], data["question_mask"], data["gold"], data["negative"], tables,
                           data["table_ids"], json.loads(str(data["report"])))
        except (KeyError, ValueError, OSError) as e:
            raise ValueError(f"{path} is not retriever training data (build_training_data): {e}") from None


def build_training_data(features: RetrievalFeatures,
                        sources: Sequence[tuple[str, TableCollection, Sequence[dict[str, str]]]],
                        hard_negatives: bool = True) -> RetrieverTrainingData:
    """The arrays of every (name, collection, queries) source; see the module docstring."""
    counts: collections.Counter = collections.Counter()
    rows: dict[str, int] = {}
    table_features: list[dict[str, np.ndarray]] = []
    questions: list[str] = []
    gold: list[int] = []
    negative: list[int] = []
    for name, collection, queries in sources:
        wanted = sorted({query["table_id"] for query in queries})
        local = _read_tables(features, name, collection, wanted, rows, table_features, counts)
        negatives = _mine_negatives(collection, local, queries) if hard_negatives else {}
        for query in queries:
            key = f"{name}:{query['table_id']}"
            if key not in rows:
                counts["questions_skipped_table_missing"] += 1
                continue
            questions.append(query["question"])
            gold.append(rows[key])
            other = negatives.get(query["id"])
            negative.append(rows[f"{name}:{other}"] if other is not None else -1)
            counts["questions_kept"] += 1
            counts["questions_with_hard_negative"] += other is not None
    if not questions:
        raise ValueError(f"no training question kept ({dict(counts)})")
    ids, mask, cut = features.questions(questions)
    counts["question_pieces_cut"] = cut
    width = features.max_query_length
    ids = np.pad(ids, [(0, 0), (0, width - ids.shape[1])])
    mask = np.pad(mask, [(0, 0), (0, width - mask.shape[1])])
    tables = {key: np.stack([t[key] for t in table_features]) for key in TABLE_INPUT_FEATURES}
    table_ids = np.array(sorted(rows, key=rows.get))
    report = dict(sorted(counts.items()))
    log.info("Retriever training data: %s", ", ".join(f"{k} {v:,}" for k, v in report.items()))
    return RetrieverTrainingData(ids, mask, np.array(gold, np.int32), np.array(negative, np.int32), tables,
                                 table_ids, report)


def _read_tables(features: RetrievalFeatures, name: str, collection: TableCollection, wanted: Sequence[str],
                 rows: dict[str, int], table_features: list, counts: collections.Counter) -> dict[str, Any]:
    """Reads and converts the `wanted` tables; returns {table_id: CollectionTable} of those kept."""
    kept = {}
    for table_id in wanted:
        try:
            table = collection.read_table(table_id)
        except (KeyError, ValueError, OSError):
            counts["tables_unreadable"] += 1
            continue
        try:
            encoded = features.table(table_to_interaction_table(table), title=table.title or "")
        except (ConversionError, ValueError):
            counts["tables_not_converted"] += 1
            continue
        for stat, count in encoded.stats.items():
            counts[f"tables_{stat}"] += count
        rows[f"{name}:{table_id}"] = len(table_features)
        table_features.append(encoded.features)
        kept[table_id] = table
        counts["tables"] += 1
    return kept


def _mine_negatives(collection: TableCollection, tables: dict[str, Any],
                    queries: Sequence[dict[str, str]]) -> dict[str, str]:
    """{query id: the best BM25 table among `tables` that is not the query's own}."""
    if len(tables) < 2:
        return {}
    ids = list(tables)
    documents = [table_document(t.title, [str(c) for c in t.frame.columns], t.frame.itertuples(index=False, name=None),
                                max_cells=5000).sparse_text(_HEADING_REPEATS) for t in tables.values()]
    index = BM25Index.build(documents, ids)
    kept = [q for q in queries if q["table_id"] in tables]
    rankings = index.search_many([q["question"] for q in kept], NEGATIVE_DEPTH)
    negatives = {}
    for query, ranking in zip(kept, rankings):
        other = next((table_id for table_id, _ in ranking if table_id != query["table_id"]), None)
        if other is not None:
            negatives[query["id"]] = other
    return negatives
