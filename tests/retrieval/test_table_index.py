"""The index directory of a collection: build, load, search, read a table back, score; and its CLIs."""

import json
import os
import sqlite3

import pandas as pd
import pytest

from tapas_tf.data.question_files import QuestionFileError, questions_to_ask, read_questions
from tapas_tf.retrieval import table_index
from tapas_tf.retrieval.collection import CollectionError, open_collection
from tapas_tf.retrieval.evaluation import evaluate_index, read_queries
from tapas_tf.retrieval.fusion import reciprocal_rank_fusion
from tapas_tf.retrieval.table_index import SEARCH_COLUMNS, IndexError_, TableIndex, build_index
from tests.command_runner import run_command

TABLES = {
    "pylons.csv": "Name,Height\nTorre Jaume I,107 m\nGant Hohtaelli,94 m\n",
    "sport/shooting.tsv": "Nation\tGold\nSoviet Union\t3\nUnited States\t2\n",
    "sport/shooting.csv": "Nation,Gold\nSoviet Union,3\n",
    "rivers.csv": "River,Length\nDanube,2850 km\nRhine,1230 km\nElbe,1094 km\n",
    "empty.csv": "",
    "binary.csv": "a,b\n\x00\x01,2\n",
}
TITLES = "table_id\ttitle\npylons.csv\tAerial lift pylons\nrivers.csv\tLongest rivers of Europe\n"


@pytest.fixture
def collection_dir(tmp_path):
    folder = tmp_path / "tables"
    for name, text in TABLES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "titles.tsv").write_text(TITLES, encoding="utf-8")
    return folder


@pytest.fixture
def index(collection_dir, tmp_path):
    collection = open_collection(collection_dir, str(tmp_path / "titles.tsv"), patterns=["*.csv", "sport/*.tsv"])
    report = build_index(collection, tmp_path / "index")
    assert report.tables == 4
    return TableIndex.load(tmp_path / "index")


def test_the_index_directory_lists_every_table_and_what_was_skipped(index, tmp_path):
    header = json.loads((tmp_path / "index" / "index.json").read_text())
    assert (header["tables"], header["methods"], header["default_method"], header["skipped"]) == (4, ["bm25"], "bm25", 2)
    assert header["spec"] == str(tmp_path / "tables")  # absolute, so the index opens it from anywhere
    report = json.loads((tmp_path / "index" / "report.json").read_text())
    assert report["skipped_by_reason"] == {"binary": 1, "empty": 1}
    assert sorted(os.path.basename(s["source"]) for s in report["skipped"]) == ["binary.csv", "empty.csv"]
    assert list(index.tables["table_id"]) == ["pylons.csv", "rivers.csv", "sport/shooting.csv", "sport/shooting.tsv"]
    assert index.tables.at["rivers.csv", "title"] == "Longest rivers of Europe"
    assert index.tables.at["sport/shooting.tsv", "title"] == "shooting"  # no title given: the file name
    assert (index.tables.at["rivers.csv", "rows"], index.tables.at["rivers.csv", "columns"]) == (3, 2)


def test_search_returns_a_dataframe_best_first(index, tmp_path):
    found = index.search("what is the length of the danube?", k=3)
    assert list(found.columns) == SEARCH_COLUMNS
    assert found["table_id"].tolist() == ["rivers.csv"]  # no other table shares a word
    assert found.iloc[0]["rank"] == 1 and found.iloc[0]["method"] == "bm25"
    assert found.iloc[0]["source"] == str(tmp_path / "tables" / "rivers.csv")
    # A title's word counts: "pylons" is only in a title, and is stemmed like the question's "pylon".
    assert index.search("which pylon is highest", k=1)["table_id"].tolist() == ["pylons.csv"]
    assert index.search("the of and", k=5).empty


def test_the_heading_outweighs_a_cell():
    # "gold" is a header word of one table and a cell word of the other: the header wins.
    docs = {"medals": ("Medals", ["Nation", "Gold"], [["Norway", "3"]]),
            "colours": ("Colours", ["Name", "Hex"], [["Gold", "ffd700"], ["Silver", "c0c0c0"]])}
    from tapas_tf.retrieval.bm25 import BM25Index
    from tapas_tf.retrieval.table_text import table_document
    texts = [table_document(*doc).sparse_text(table_index.HEADING_REPEATS) for doc in docs.values()]
    assert BM25Index.build(texts, list(docs)).search("gold", k=2)[0][0] == "medals"


def test_a_table_is_read_again_whole(collection_dir, tmp_path):
    (collection_dir / "long.csv").write_text("n,square\n" + "".join(f"{i},{i * i}\n" for i in range(30)))
    build_index(open_collection(collection_dir, max_rows=10), tmp_path / "small")
    index = TableIndex.load(tmp_path / "small")
    assert index.tables.at["long.csv", "rows"] == 10 and bool(index.tables.at["long.csv", "rows_truncated"])
    whole = index.read_table("long.csv", max_rows=1000)
    assert whole.frame.shape == (30, 2) and not whole.rows_truncated
    with pytest.raises(KeyError, match="no table 'nope.csv'"):
        index.read_table("nope.csv")


def test_an_index_of_a_sqlite_database(tmp_path):
    database = tmp_path / "shop.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE orders (item TEXT, shipped TEXT)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("lamp", "May"), ("desk", "June")])
        connection.execute("CREATE TABLE staff (name TEXT, role TEXT)")
        connection.execute("INSERT INTO staff VALUES ('Ada', 'buyer')")
    build_index(open_collection(f"sqlite:///{database}"), tmp_path / "index")
    index = TableIndex.load(tmp_path / "index")
    assert index.search("which item shipped in may", k=2)["table_id"].tolist() == ["orders"]
    assert index.read_table("staff").frame.values.tolist() == [["Ada", "buyer"]]


def test_errors_name_the_directory(tmp_path, collection_dir):
    with pytest.raises(IndexError_, match="no such index directory"):
        TableIndex.load(tmp_path / "missing")
    (tmp_path / "not_an_index").mkdir()
    with pytest.raises(IndexError_, match="has no index.json"):
        TableIndex.load(tmp_path / "not_an_index")
    build_index(open_collection(collection_dir), tmp_path / "old")
    header = json.loads((tmp_path / "old" / "index.json").read_text())
    (tmp_path / "old" / "index.json").write_text(json.dumps(header | {"format_version": 0}))
    with pytest.raises(IndexError_, match="format version 0"):
        TableIndex.load(tmp_path / "old")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.csv").write_text("")
    with pytest.raises(IndexError_, match="no table could be read .skipped: 1 empty"):
        build_index(open_collection(bad), tmp_path / "bad_index")


def test_methods_the_index_lacks_are_refused(index):
    with pytest.raises(ValueError, match="has the methods bm25, not dense"):
        index.search("danube", method="dense")
    with pytest.raises(ValueError, match="unknown retrieval method 'bm42'"):
        index.search("danube", method="bm42")


def test_patterns_apply_to_folders_only(tmp_path):
    database = tmp_path / "x.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE t (a TEXT)")
    with pytest.raises(CollectionError, match="apply to a folder only"):
        open_collection(str(database), patterns=["*.csv"])


def test_reciprocal_rank_fusion_by_hand():
    fused = reciprocal_rank_fusion([[("a", 9.0), ("b", 5.0)], [("b", 0.9), ("c", 0.8), ("b", 0.1)]], k=1)
    # b: 1/(1+2) + 1/(1+1) = 0.8333; a: 1/2 = 0.5; c: 1/3 (b's repeat in the second list is ignored).
    assert [(i, round(s, 4)) for i, s in fused] == [("b", 0.8333), ("a", 0.5), ("c", 0.3333)]
    assert reciprocal_rank_fusion([[("a", 1.0)], [("c", 1.0)]], k=60) == [("a", 1 / 61), ("c", 1 / 61)]
    assert len(reciprocal_rank_fusion([[("a", 1.0), ("b", 1.0)]], limit=1)) == 1
    with pytest.raises(ValueError, match="2 weights for 1 rankings"):
        reciprocal_rank_fusion([[("a", 1.0)]], weights=[1, 2])


def test_evaluation_counts_hits_by_rank(index, tmp_path):
    queries = tmp_path / "queries.tsv"
    queries.write_text("id\tquestion\ttable_id\n"
                       "q1\tlength of the rhine\trivers.csv\n"
                       "q2\theight of torre jaume i\tpylons.csv\n"
                       "q3\tthe of and\tpylons.csv\n"
                       "q4\tgold of the soviet union\tmissing.csv\n")
    result = evaluate_index(index, read_queries(str(queries)), ks=(1, 2))
    assert result["default"] == "bm25" and result["gold_not_indexed"] == 1
    assert result["methods"]["bm25"] == {"recall@1": 0.5, "recall@2": 0.5, "mrr": 0.5, "queries": 4}


def test_question_files_name_the_line(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("id\tquestion\nq1\twhich river?\n\nq2\tsecond\textra\n")
    with pytest.raises(QuestionFileError, match=r"q.tsv:4: 3 tab-separated fields, the header has 2"):
        read_questions(str(path))
    path.write_text("id\tquestion\nq1\tone\nq1\ttwo\n")
    with pytest.raises(QuestionFileError, match=r"q.tsv:3: the id 'q1' is on line 2 too"):
        read_questions(str(path))
    path.write_text("id\tutterance\nq1\tone\n")
    with pytest.raises(QuestionFileError, match=r"q.tsv:1: the header has no column question"):
        read_questions(str(path))
    path.write_text("id\tquestion\nq1\t \n")
    with pytest.raises(QuestionFileError, match=r"q.tsv:2: the question is empty"):
        read_questions(str(path))
    path.write_text('id\tquestion\tnote\nq1\t"a\tquoted tab"\tx\n')
    assert read_questions(str(path)) == [{"id": "q1", "question": "a\tquoted tab", "note": "x"}]
    assert list(questions_to_ask(["how", "tall?"], None, None)) == [("1", "how tall?")]
    import io
    assert list(questions_to_ask([], None, io.StringIO("one\n\nthree\n"))) == [("1", "one"), ("3", "three")]
    with pytest.raises(QuestionFileError, match="not both"):
        list(questions_to_ask(["q"], str(path), None))


def test_the_index_search_and_evaluate_commands(collection_dir, tmp_path):
    out = tmp_path / "cli_index"
    result = run_command("index", f"--tables={collection_dir}", f"--titles={tmp_path / 'titles.tsv'}",
                         f"--index_dir={out}", "--patterns=*.csv", "--noprogress_bar", "--dense_model=none")
    assert result.returncode == 0, result.stderr
    summary = result.stdout.strip()  # BM25 alone: `none` turns the bundled retriever off.
    assert summary.startswith(f"indexed 3 tables into {out} (bm25; default bm25) in ")
    assert summary.endswith(" s; skipped 1 binary, 1 empty (named in report.json)")
    result = run_command("search", f"--index_dir={out}", "--json", "--k=2", "length of the danube")
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stdout)
    assert (line["id"], line["method"], [t["table_id"] for t in line["tables"]]) == ("1", "bm25", ["rivers.csv"])
    assert line["tables"][0]["title"] == "Longest rivers of Europe"
    questions = tmp_path / "questions.tsv"
    questions.write_text("id\tquestion\ttable_id\na\tlength of the danube\trivers.csv\nb\tsoviet gold\tpylons.csv\n")
    result = run_command("search", f"--index_dir={out}", f"--questions_file={questions}")
    assert result.returncode == 0, result.stderr
    assert "length of the danube\n    1" in result.stdout and "sport/shooting.csv" in result.stdout
    result = run_command("evaluate-retrieval", f"--index_dir={out}", f"--queries={questions}", "--ks=1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"default": "bm25", "gold_not_indexed": 0, "methods": {
        "bm25": {"recall@1": 0.5, "mrr": 0.5, "queries": 2}}}
    result = run_command("search", f"--index_dir={tmp_path / 'nope'}", "x")
    assert result.returncode == 1 and "no such index directory" in result.stderr
    result = run_command("index", f"--tables={tmp_path / 'nope'}", f"--index_dir={out}")
    assert result.returncode == 1 and result.stderr.strip().endswith("no such file or directory")


def test_search_results_frame_is_empty_with_columns(index):
    assert isinstance(index.search("zzz", k=3), pd.DataFrame)
    assert list(index.search("zzz", k=3).columns) == SEARCH_COLUMNS
