"""How well a retriever ranks each question's gold table: recall@k and mean reciprocal rank.

    >>> from tapas_tf.retrieval.metrics import retrieval_report
    >>> rankings = [["t1", "t2"], ["t3", "t1"], ["t2"]]   # one ranked list of table ids per question
    >>> gold = ["t1", "t1", "t9"]                          # the table each question is about
    >>> retrieval_report({"bm25": rankings}, gold, ks=(1, 2))["bm25"]
    {'recall@1': 0.3333333333333333, 'recall@2': 0.6666666666666666, 'mrr': 0.5, 'queries': 3}

Each question has one gold table. recall@k is the share of questions whose gold table is among
the first k ids of their ranking; the reciprocal rank is 1 / (position of the gold table, from 1),
0 when it is absent from the ranking (so MRR is "MRR at the ranking's length": compare methods
on rankings of equal length). An id repeated in a ranking counts at its first position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["gold_rank", "mean_reciprocal_rank", "recall_at_k", "retrieval_report"]

DEFAULT_KS = (1, 10, 50)


def gold_rank(ranking: Sequence[str], gold_id: str) -> int | None:
    """The 1-based position of `gold_id` in `ranking`, or None when it is absent."""
    for position, table_id in enumerate(ranking, start=1):
        if table_id == gold_id:
            return position
    return None


def _ranks(ranked_ids: Sequence[Sequence[str]], gold_ids: Sequence[str]) -> list[int | None]:
    if isinstance(gold_ids, str):
        # A bare string would be read as one gold id per character.
        raise TypeError("gold_ids must be a sequence of ids, one per query, not a string")
    if len(ranked_ids) != len(gold_ids):
        raise ValueError(f"{len(ranked_ids)} rankings but {len(gold_ids)} gold ids")
    if not gold_ids:
        raise ValueError("no queries to score")
    return [gold_rank(ranking, gold) for ranking, gold in zip(ranked_ids, gold_ids)]


def _recall(ranks: list[int | None], ks: Sequence[int]) -> dict[str, float]:
    for k in ks:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
    return {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / len(ranks) for k in ks}


def _mrr(ranks: list[int | None]) -> float:
    return sum(1.0 / r for r in ranks if r is not None) / len(ranks)


def recall_at_k(
    ranked_ids: Sequence[Sequence[str]], gold_ids: Sequence[str], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """{"recall@k": share of queries with their gold id in the first k} for each k in `ks`."""
    return _recall(_ranks(ranked_ids, gold_ids), ks)


def mean_reciprocal_rank(ranked_ids: Sequence[Sequence[str]], gold_ids: Sequence[str]) -> float:
    """Mean over queries of 1 / rank of the gold id (0 for a query whose ranking lacks it)."""
    return _mrr(_ranks(ranked_ids, gold_ids))


def retrieval_report(
    method_to_rankings: Mapping[str, Sequence[Sequence[str]]],
    gold: Sequence[str],
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, dict[str, float | int]]:
    """Per method: {"recall@1", "recall@10", "recall@50" (or the given ks), "mrr", "queries"}."""
    report: dict[str, dict[str, float | int]] = {}
    for method, rankings in method_to_rankings.items():
        ranks = _ranks(rankings, gold)
        report[method] = {**_recall(ranks, ks), "mrr": _mrr(ranks), "queries": len(ranks)}
    return report
