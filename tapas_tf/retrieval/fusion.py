"""Fusing rankings: one hybrid ranking from a sparse and a dense one.

    >>> from tapas_tf.retrieval.fusion import reciprocal_rank_fusion
    >>> bm25 = [("t1", 12.0), ("t2", 9.5)]
    >>> dense = [("t2", 0.81), ("t3", 0.80)]
    >>> [(table_id, round(score, 5)) for table_id, score in reciprocal_rank_fusion([bm25, dense], k=60)]
    [('t2', 0.03252), ('t1', 0.01639), ('t3', 0.01613)]

Reciprocal-rank fusion (Cormack et al., SIGIR 2009): a document's fused score is the sum over
rankings of weight / (k + rank), rank counted from 1, and 0 from a ranking that lacks it. It
needs no score calibration between methods whose scores live on different scales (BM25 is
unbounded, a cosine lies in [-1, 1]), which is why it is the default hybrid; `k` damps the
influence of the very first ranks. Ties go to the document seen first (rankings in order, then
rank).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_RRF_K", "reciprocal_rank_fusion"]

Ranking = Sequence[tuple[str, float]]
DEFAULT_RRF_K = 60  # Cormack et al.'s constant, also Elasticsearch's and Vespa's default.


def reciprocal_rank_fusion(rankings: Sequence[Ranking], k: float = DEFAULT_RRF_K,
                           weights: Sequence[float] | None = None,
                           limit: int | None = None) -> list[tuple[str, float]]:
    """The fused ranking of `rankings` (each (id, score) best first) as (id, fused score), best first.

    Args:
      rankings: one ranked list per method; an id repeated within one counts at its first rank.
      k: the damping constant (> 0).
      weights: one weight per ranking (default 1 each).
      limit: keep at most this many (default all fused ids).
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights):
        seen_here: set[str] = set()
        for rank, (table_id, _) in enumerate(ranking, start=1):
            if table_id in seen_here:
                continue
            seen_here.add(table_id)
            first_seen.setdefault(table_id, len(first_seen))
            fused[table_id] = fused.get(table_id, 0.0) + weight / (k + rank)
    order = sorted(fused, key=lambda table_id: (-fused[table_id], first_seen[table_id]))
    if limit is not None:
        order = order[:limit]
    return [(table_id, fused[table_id]) for table_id in order]
