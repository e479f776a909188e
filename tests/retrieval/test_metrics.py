"""recall@k, mean reciprocal rank and the per-method report, on rankings checked by hand."""

import pytest

from tapas_tf.retrieval.metrics import gold_rank, mean_reciprocal_rank, recall_at_k, retrieval_report

# Gold ranks by hand: q0 -> 1, q1 -> 3, q2 -> absent, q3 -> 12 (11 others first).
RANKINGS = [
    ["a", "b", "c"],
    ["x", "y", "b", "b"],
    ["c", "d"],
    [f"o{i}" for i in range(11)] + ["d", "a"],
]
GOLD = ["a", "b", "z", "d"]


def test_gold_rank_is_one_based_first_occurrence_or_none():
    assert gold_rank(["x", "g", "g"], "g") == 2
    assert gold_rank([], "g") is None


def test_recall_at_k():
    # @1: q0 only -> 1/4. @10: q0, q1 -> 2/4. @50: q0, q1, q3 -> 3/4.
    assert recall_at_k(RANKINGS, GOLD) == {"recall@1": 0.25, "recall@10": 0.5, "recall@50": 0.75}
    assert recall_at_k(RANKINGS, GOLD, ks=(3, 12)) == {"recall@3": 0.5, "recall@12": 0.75}


def test_mean_reciprocal_rank_counts_absent_gold_as_zero():
    # (1/1 + 1/3 + 0 + 1/12) / 4 = (12/12 + 4/12 + 1/12) / 4 = 17/48
    assert mean_reciprocal_rank(RANKINGS, GOLD) == pytest.approx(17 / 48)


def test_retrieval_report_per_method():
    perfect = [[g, "other"] for g in GOLD]
    report = retrieval_report({"bm25": RANKINGS, "oracle": perfect}, GOLD)
    assert report["bm25"] == {
        "recall@1": 0.25, "recall@10": 0.5, "recall@50": 0.75, "mrr": pytest.approx(17 / 48), "queries": 4,
    }
    assert report["oracle"] == {"recall@1": 1.0, "recall@10": 1.0, "recall@50": 1.0, "mrr": 1.0, "queries": 4}


@pytest.mark.parametrize("rankings, gold, error", [
    ([["a"]], ["a", "b"], ValueError),   # one ranking per query
    ([], [], ValueError),                # nothing to average
    ([["a"]], "a", TypeError),           # a string is not a list of gold ids
])
def test_mismatched_or_empty_inputs_are_errors(rankings, gold, error):
    with pytest.raises(error):
        recall_at_k(rankings, gold)


def test_k_below_one_is_an_error():
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k([["a"]], ["a"], ks=(0,))
