"""Answers over a collection of tables (`tapas_tf.qa.collection_qa`) and `tapas-tf ask --index_dir`.

The choice between tables is tested with a stand-in reader whose confidence is set per table, so
that the rule (retrieval_weight * log p_retrieval + log confidence) is checked on known numbers;
the command lines run end to end with the bundled model, in a fresh process.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys
from typing import Dict, List, Optional

import pandas as pd
import pytest

from tapas_tf.qa.ask_results import AskResult, SelectedCell
from tapas_tf.qa.collection_qa import (
    DEFAULT_TEMPERATURES,
    CollectionQA,
    NoTableFound,
    combined_score,
    retrieval_probabilities,
)
from tapas_tf.qa.tables import AskError
from tapas_tf.retrieval.collection import open_collection
from tapas_tf.retrieval.table_index import TableIndex, build_index

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "tapas_tf", "data", "example_tables")


# --- the rule, on numbers --------------------------------------------------------------------------


def test_retrieval_probabilities_are_the_softmax_of_the_scores():
    probabilities = retrieval_probabilities([2.0, 1.0, 0.0], 1.0)
    total = 1 + math.exp(-1) + math.exp(-2)
    assert probabilities == pytest.approx([1 / total, math.exp(-1) / total, math.exp(-2) / total])
    # A higher temperature flattens them: at 2.0 the gaps halve.
    total = 1 + math.exp(-0.5) + math.exp(-1)
    assert retrieval_probabilities([2.0, 1.0, 0.0], 2.0) == pytest.approx([1 / total, math.exp(-0.5) / total,
                                                                          math.exp(-1) / total])
    assert retrieval_probabilities([], 1.0) == []
    with pytest.raises(ValueError, match="temperature"):
        retrieval_probabilities([1.0], 0.0)


def test_combined_score_adds_weighted_log_probabilities():
    assert combined_score(0.5, 0.25, 1.0) == pytest.approx(math.log(0.5) + math.log(0.25))
    assert combined_score(0.5, 0.25, 0.0) == pytest.approx(math.log(0.25))
    # No confidence, or 0, ranks below every real answer instead of failing.
    assert combined_score(0.5, 0.0, 1.0) == combined_score(0.5, None, 1.0) < combined_score(0.01, 0.001, 1.0)


# --- choosing among tables, with a stand-in reader -----------------------------------------------


@dataclasses.dataclass
class _Prepared:
    frame: pd.DataFrame
    table: object = None


@dataclasses.dataclass
class _Encoded:
    prepared: _Prepared
    question: str
    previous: Optional[object] = None


class _Encoder:
    def prepare(self, frame: pd.DataFrame) -> _Prepared:
        return _Prepared(frame)


class _Reader:
    """Answers with the first cell of the table's first column; its confidence is the table's
    `confidence` column (so each test sets how sure the reader is of each table)."""

    def __init__(self):
        self.encoder = _Encoder()
        self.batches: List[int] = []
        self.asked: List[tuple] = []

    def encode(self, prepared: _Prepared, question: str, previous=None) -> _Encoded:
        if "refuse" in prepared.frame.columns:
            raise AskError("this table is too big for the model")
        return _Encoded(prepared, question, previous)

    def answer_encoded(self, encoded) -> List[AskResult]:
        self.batches.append(len(encoded))
        return [self._answer(item) for item in encoded]

    def _run(self, encoded) -> List[AskResult]:
        return self.answer_encoded(encoded)

    def _answer(self, item: _Encoded) -> AskResult:
        frame = item.prepared.frame
        self.asked.append((frame.columns[0], item.question, item.previous is not None))
        cell = SelectedCell(0, 0, frame.columns[0], str(frame.iloc[0, 0]), 0.9, None)
        return AskResult(item.question, (cell,), "NONE", {}, None, (), {(0, 0): 0.9}, (0,), (0,), (), 32,
                         model="stand-in", confidence=float(frame["confidence"].iloc[0]),
                         follow_up=item.previous is not None)


def _write(folder, name: str, frame: pd.DataFrame) -> None:
    frame.to_csv(folder / name, index=False)


@pytest.fixture
def three_tables(tmp_path):
    """Three tables: "rivers" matches "longest river" best, "lakes" second, "mountains" not at all."""
    folder = tmp_path / "tables"
    folder.mkdir()
    _write(folder, "rivers.csv", pd.DataFrame({"river": ["Nile", "Amazon"], "length": ["6650", "6400"],
                                               "confidence": ["0.2", "0.2"]}))
    _write(folder, "lakes.csv", pd.DataFrame({"lake": ["Baikal", "Tanganyika"], "river outflow": ["Angara", "Lukuga"],
                                              "confidence": ["0.8", "0.8"]}))
    _write(folder, "mountains.csv", pd.DataFrame({"mountain": ["Everest"], "height": ["8849"],
                                                  "confidence": ["0.9"]}))
    build_index(open_collection(str(folder)), tmp_path / "index", progress=False)
    return folder, TableIndex.load(tmp_path / "index")


def _ranks(index: TableIndex, question: str) -> Dict[str, float]:
    return dict(index.rankings([question], 10)[0])


def test_the_answer_combines_retrieval_and_confidence(three_tables):
    _, index = three_tables
    question = "which river is the longest river?"
    scores = _ranks(index, question)
    assert list(scores) == ["rivers.csv", "lakes.csv"]  # BM25: rivers first; mountains shares no word.
    probabilities = retrieval_probabilities(list(scores.values()), 1.0)

    # Weighted fully by retrieval, the first table answers unless the reader is far surer of another.
    found = CollectionQA(index, _Reader(), k=5, retrieval_weight=1.0).answer(question)
    expected = {name: combined_score(p, c, 1.0) for name, p, c in zip(scores, probabilities, (0.2, 0.8))}
    best = max(expected, key=expected.get)
    assert found.table_id == best
    assert found.chosen.combined == pytest.approx(expected[best])
    assert [c.table_id for c in found.candidates] == sorted(expected, key=expected.get, reverse=True)

    # Without the retrieval term, the reader's confidence alone chooses: lakes (0.8 > 0.2).
    found = CollectionQA(index, _Reader(), k=5, retrieval_weight=0.0).answer(question)
    assert found.table_id == "lakes.csv" and found.result.answer_text == "Baikal"
    assert [c.table_id for c in found.runners_up] == ["rivers.csv"]
    assert found.runners_up[0].retrieval_probability == pytest.approx(probabilities[0])

    record = found.to_dict()
    assert (record["table_id"], record["table_title"], record["retrieval_rank"]) == ("lakes.csv", "lakes", 2)
    assert record["answer"] == "Baikal" and record["runners_up"][0]["table_id"] == "rivers.csv"
    frame = found.candidates_frame()
    assert frame["table_id"].tolist() == ["lakes.csv", "rivers.csv"] and frame["chosen"].tolist() == [True, False]


def test_each_method_has_the_temperature_of_its_score_scale(three_tables):
    _, index = three_tables
    assert CollectionQA(index, _Reader()).temperature == DEFAULT_TEMPERATURES["bm25"] == 1.0
    assert CollectionQA(index, _Reader(), temperature=0.3).temperature == 0.3
    # A hybrid score is about 1 / (30 + rank): at temperature 1 the first ten tables would be all but
    # equally likely; at the hybrid's default the first is clearly the likeliest.
    rrf = [1 / (30 + rank) + 0.7 / (30 + rank) for rank in range(1, 11)]
    assert max(retrieval_probabilities(rrf, 1.0)) < 0.101
    assert retrieval_probabilities(rrf, DEFAULT_TEMPERATURES["hybrid"])[0] > 0.3
    assert set(DEFAULT_TEMPERATURES) == {"bm25", "dense", "hybrid"}


def test_k_limits_the_tables_read_and_all_go_to_the_reader_together(three_tables):
    _, index = three_tables
    reader = _Reader()
    found = CollectionQA(index, reader, k=1, retrieval_weight=0.0).answer("which river is the longest river?")
    assert found.table_id == "rivers.csv" and found.runners_up == ()
    reader.batches.clear()
    CollectionQA(index, reader, k=5).answer_many(["longest river", "river outflow of baikal"])
    assert reader.batches == [4]  # Two questions x two matching tables, in one call.


def test_a_table_that_cannot_be_asked_is_a_runner_up_with_its_error(three_tables):
    folder, index = three_tables
    os.remove(folder / "rivers.csv")  # Indexed, then gone.
    found = CollectionQA(index, _Reader(), k=5).answer("which river is the longest river?")
    assert found.table_id == "lakes.csv"
    failed = found.runners_up[-1]
    assert failed.table_id == "rivers.csv" and failed.result is None and "cannot be read" in failed.error
    assert found.to_dict()["runners_up"][-1]["error"] == failed.error


def test_no_matching_table_and_no_askable_table_are_errors(three_tables):
    folder, index = three_tables
    cqa = CollectionQA(index, _Reader(), k=5)
    with pytest.raises(NoTableFound, match="shares no word"):
        cqa.answer("zzzz qqqq")
    _write(folder, "mountains.csv", pd.DataFrame({"mountain": ["Everest"], "refuse": ["x"], "confidence": ["1"]}))
    with pytest.raises(AskError, match="none of the 1 tables found.*too big"):
        CollectionQA(index, _Reader(), k=5).answer("which mountain is highest?")
    with pytest.raises(ValueError, match="k must be"):
        CollectionQA(index, _Reader(), k=0)


def test_a_conversation_stays_with_the_table_of_its_first_answer(three_tables):
    _, index = three_tables
    reader = _Reader()
    chat = CollectionQA(index, reader, k=5, retrieval_weight=0.0).conversation()
    first = chat.ask("which river is the longest river?")
    assert chat.first.table_id == "lakes.csv" and not first.follow_up
    # "mountain" would retrieve the mountains table; a follow-up stays with lakes and sees the answer.
    follow = chat.ask("and which mountain?")
    assert follow.follow_up and reader.asked[-1] == ("lake", "and which mountain?", True)
    assert chat.history == [first, follow]
    chat.reset()
    chat.ask("which mountain is highest?")
    assert chat.first.table_id == "mountains.csv" and len(chat.history) == 1


# --- the command line, end to end with the bundled model ------------------------------------------


def _run(*args, timeout=300, env=None):
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run([sys.executable, "-m", "tapas_tf.commands.dispatch", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=environment)


@pytest.fixture(scope="module")
def example_index(tmp_path_factory):
    directory = tmp_path_factory.mktemp("collection") / "index"
    # BM25 alone, so that a question sharing no word with any table has no candidate (the README's
    # commands test asks the bundled retriever's hybrid index).
    result = _run("index", f"--tables={EXAMPLES}", f"--index_dir={directory}", "--noprogress_bar", "--dense_model=none")
    assert result.returncode == 0, result.stderr[-2000:]
    return directory


def test_ask_index_dir_questions_file_json_names_each_answers_table(example_index, tmp_path):
    questions = tmp_path / "questions.tsv"
    questions.write_text("id\tquestion\nq1\twhat is the height of torre jaume i?\n"
                         "q2\tzzzz qqqq\nq3\twhich airline flies to calgary?\n")
    result = _run("ask", f"--index_dir={example_index}", f"--questions_file={questions}", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["q1", "q2", "q3"]
    assert lines[0]["table_id"] == "aerial_lift_pylons.csv" and "107 m" in lines[0]["answer"]
    assert lines[0]["table_title"] == "aerial_lift_pylons" and lines[0]["table_source"].endswith("aerial_lift_pylons.csv")
    assert "shares no word" in lines[1]["error"] and "table_id" not in lines[1]
    assert lines[2]["table_id"] == "playa_de_oro_airport_destinations.csv"
    assert all("runners_up" in line for line in (lines[0], lines[2]))
    assert "1 of 3 questions" in result.stderr


def test_ask_table_questions_file_answers_each_with_its_id(tmp_path):
    questions = tmp_path / "questions.tsv"
    questions.write_text("id\tquestion\nfirst\twhat is the height of torre jaume i?\nsecond\twhich town is in spain?\n")
    table = os.path.join(EXAMPLES, "aerial_lift_pylons.csv")
    result = _run("ask", f"--table={table}", f"--questions_file={questions}", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["first", "second"]
    assert "107 m" in lines[0]["answer"] and "table_id" not in lines[0]


def test_ask_index_dir_text_names_the_table_and_a_conversation_stays_with_it(example_index):
    result = subprocess.run([sys.executable, "-m", "tapas_tf.commands.dispatch", "ask", f"--index_dir={example_index}",
                             "--json"], input="which towns are in austria?\nwhich of them is kaprun?\n",
                            capture_output=True, text=True, timeout=300, cwd=ROOT,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    first, follow = [json.loads(line) for line in result.stdout.splitlines()]
    assert first["table_id"] == follow["table_id"] == "aerial_lift_pylons.csv"
    assert not first["follow_up"] and follow["follow_up"]


@pytest.mark.parametrize("args, text", [
    (["--index_dir=/nonexistent/index", "q"], "no such index directory"),
    (["--index_dir=/nonexistent/index", "--table=t.csv", "q"], "not both"),
    (["--index_dir=/nonexistent/index", "--questions_file=/nonexistent/q.tsv"], "no such questions file"),
])
def test_ask_bad_index_and_questions_file_fail_in_one_line_before_tensorflow(args, text, tmp_path):
    fake = tmp_path / "fake_site" / "tensorflow"  # An `import tensorflow` that fails loudly.
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('TENSORFLOW WAS IMPORTED')\n")
    result = _run("ask", *args, env={"PYTHONPATH": str(tmp_path / "fake_site")})
    assert result.returncode in (1, 2), result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], result.stderr
    assert "Traceback" not in result.stderr and "TENSORFLOW WAS IMPORTED" not in result.stderr
