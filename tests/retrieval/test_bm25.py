"""BM25 over table documents: the tokenizer, scores worked out by hand, ranking, and saved indices."""

import json
import math
import re

import bm25s.stopwords
import pytest

from tapas_tf.retrieval import bm25
from tapas_tf.retrieval.bm25 import BM25Index, IndexFormatError, tokenize

# Tokens: d0 [red, apple, pie] (3), d1 [green, apple] (2), d2 [red, red, car] (3; "the" is a stop word).
DOCUMENTS = ["Red apple pie", "green APPLE", "the red red car"]
IDS = ["d0", "d1", "d2"]


def _hand_scores():
    """BM25 (Lucene variant) of the query "red apple", written out with this corpus's numbers."""
    k1, b = 1.2, 0.75
    n, avgdl = 3, (3 + 2 + 3) / 3                       # avgdl = 8/3
    idf_red = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))   # df(red) = 2: log(1.6)
    idf_apple = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))  # df(apple) = 2: log(1.6)

    def tfc(tf, dl):  # tf / (tf + k1 * (1 - b + b * dl / avgdl))
        return tf / (tf + k1 * (1 - b + b * dl / avgdl))

    d0 = idf_red * tfc(1, 3) + idf_apple * tfc(1, 3)  # 2 * 0.470004 * 1/2.3125 = 0.406490
    d1 = idf_apple * tfc(1, 2)                         # 0.470004 * 1/1.975    = 0.237977
    d2 = idf_red * tfc(2, 3)                           # 0.470004 * 2/3.3125   = 0.283776
    return {"d0": d0, "d1": d1, "d2": d2}


@pytest.fixture(scope="module")
def index():
    return BM25Index.build(DOCUMENTS, IDS)


@pytest.mark.parametrize("text, tokens", [
    ("The Height of TORRE Jaume I?", ["height", "torr", "jaum", "i"]),   # stemmed, as Snowball's English
    ("1,234 people, 3.5 km", ["1234", "peopl", "3.5", "km"]),
    ("teams won matches", ["team", "won", "match"]),
    ("1,234,567.25", ["1234567.25"]),
    ("1,2345 and 1,23", ["1", "2345", "1", "23"]),   # not thousands separators: split there
    ("107m vs 107 m", ["107", "m", "vs", "107", "m"]),
    ("Zürich_café", ["zürich", "café"]),
    ("the of and", []),
    ("", []),
])
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_stop_words_are_lucenes_english_list():
    # The module keeps its own copy; this notices if the pinned bm25s's list ever differs.
    assert bm25.STOP_WORDS == frozenset(bm25s.stopwords.STOPWORDS_EN)
    assert len(bm25.STOP_WORDS) == 33


def test_scores_match_the_formula_by_hand(index):
    expected = _hand_scores()
    hits = index.search("red apple", k=3)
    assert [table_id for table_id, _ in hits] == ["d0", "d2", "d1"]
    for table_id, score in hits:
        assert score == pytest.approx(expected[table_id], rel=1e-6)
    assert expected["d0"] == pytest.approx(0.406490, abs=1e-6)


def test_rare_word_outweighs_tf_and_k_limits(index):
    # "car": df 1, idf = log(1 + 2.5/1.5) = log(8/3); d2: 0.980829 * 1/2.3125 = 0.424142
    assert index.search("car", k=5) == [("d2", pytest.approx(math.log(8 / 3) / 2.3125, rel=1e-6))]
    assert [i for i, _ in index.search("red apple", k=1)] == ["d0"]
    assert index.search("red apple", k=0) == []


def test_k_larger_than_the_corpus_returns_every_matching_document(index):
    assert len(index.search("red apple", k=100)) == 3
    assert [i for i, _ in index.search("apple", k=100)] == ["d1", "d0"]   # the shorter document first


@pytest.mark.parametrize("query", ["the of and", "", "   ", "banana", "?!"])
def test_queries_with_no_indexed_word_return_nothing(index, query):
    assert index.search(query, k=10) == []


def test_equal_scores_keep_corpus_order():
    tied = BM25Index.build(["cat dog", "dog cat", "cat", "fish"], ["b", "a", "c", "d"])
    assert [i for i, _ in tied.search("dog", k=10)] == ["b", "a"]


def test_search_many_is_search_per_query(index):
    queries = ["red apple", "the", "car"]
    assert index.search_many(queries, k=2) == [index.search(q, k=2) for q in queries]


def test_build_checks_its_inputs():
    with pytest.raises(ValueError, match="2 documents but 1 ids"):
        BM25Index.build(["a b", "c"], ["x"])
    with pytest.raises(ValueError, match="duplicate"):
        BM25Index.build(["red", "blue"], ["x", "x"])
    with pytest.raises(ValueError, match="no documents"):
        BM25Index.build([], [])
    with pytest.raises(ValueError, match="stop word"):
        BM25Index.build(["the", ""], ["x", "y"])


def test_save_load_round_trip(index, tmp_path):
    index.save(tmp_path / "idx")
    header = json.loads((tmp_path / "idx" / bm25.HEADER_FILE).read_text())
    assert header["format_version"] == bm25.FORMAT_VERSION
    assert header["library"] == "bm25s" and header["library_version"] == bm25s.__version__
    assert header["tokenizer"]["stop_words"] == sorted(bm25.STOP_WORDS)
    loaded = BM25Index.load(tmp_path / "idx")
    assert loaded.ids == IDS
    for query in ["red apple", "car", "green pie", "the"]:
        assert loaded.search(query, k=3) == index.search(query, k=3)
    assert BM25Index.load(tmp_path / "idx", mmap=True).search("red apple", k=3) == index.search("red apple", k=3)


def _edit_header(directory, **changes):
    path = directory / bm25.HEADER_FILE
    header = json.loads(path.read_text())
    header.update(changes)
    path.write_text(json.dumps(header))


def test_load_refuses_another_format_version(index, tmp_path):
    index.save(tmp_path)
    _edit_header(tmp_path, format_version=bm25.FORMAT_VERSION + 1)
    with pytest.raises(IndexFormatError, match=rf"{re.escape(str(tmp_path))}.*format version {bm25.FORMAT_VERSION + 1}"):
        BM25Index.load(tmp_path)


def test_load_refuses_another_tokenisation(index, tmp_path):
    index.save(tmp_path)
    _edit_header(tmp_path, tokenizer={"version": 0})
    with pytest.raises(IndexFormatError, match="another tokenisation"):
        BM25Index.load(tmp_path)


@pytest.mark.parametrize("missing", [bm25.IDS_FILE, f"{bm25.LIBRARY_DIR}/vocab.index.json",
                                     f"{bm25.LIBRARY_DIR}/data.csc.index.npy"])
def test_load_names_a_missing_file(index, tmp_path, missing):
    index.save(tmp_path)
    (tmp_path / missing).unlink()
    with pytest.raises(IndexFormatError, match=re.escape(f"{tmp_path} is missing {missing}")):
        BM25Index.load(tmp_path)


def test_load_of_a_directory_without_an_index(tmp_path):
    with pytest.raises(IndexFormatError, match=re.escape(f"{tmp_path} has no {bm25.HEADER_FILE}")):
        BM25Index.load(tmp_path)
    assert issubclass(IndexFormatError, ValueError)
