"""WikiSQL end to end through run_task.py: create_data (both tasks), train, predict_and_evaluate.

The release is written here in WikiSQL's documented JSONL format (its tables are not available
offline): `{split}.jsonl` questions with `{"table_id", "question", "sql": {"sel", "agg", "conds"}}`
and `{split}.tables.jsonl` tables with `{"id", "header", "types", "rows"}`.
"""

import json
import os
import subprocess
import sys

from tapas_tf.data.interaction_io import read_interactions
from tapas_tf.pipelines.reports import REPORT_FILE
from tests.vocab_fixture import vocab_tokens, write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TABLE = {"id": "1-10", "header": ["City", "Country", "Population"], "types": ["text", "text", "real"],
         "rows": [["Paris", "France", "2148000"], ["Lyon", "France", 513000], ["Berlin", "Germany", 3645000]]}
NO_AGG, MAX, MIN, COUNT, SUM, AVG = range(6)
EQ, GT, LT = range(3)


def _question(text, sel, agg=NO_AGG, conds=(), table_id="1-10", **released):
    return json.dumps({"phase": 1, "table_id": table_id, "question": text,
                       "sql": {"sel": sel, "agg": agg, "conds": [list(c) for c in conds]}, **released})


def _wikisql_release(tmp_path):
    """train: 4 good questions, one invalid JSON line, one question on an unknown table; its tables
    file has one good table and one ragged table (line 2). dev: 2 questions."""
    data = tmp_path / "wikisql"
    data.mkdir()
    ragged = json.dumps({"id": "2-20", "header": ["a", "b"], "rows": [["x"]]})
    (data / "train.tables.jsonl").write_text(json.dumps(TABLE) + "\n" + ragged + "\n")
    (data / "train.jsonl").write_text("\n".join([
        _question("which cities are in france?", 0, conds=[(1, EQ, "France")], answer=["lyon", "Paris"]),
        _question("how many cities are in france?", 0, COUNT, conds=[(1, EQ, "france")], answer=3),
        _question("what is the total population of france?", 2, SUM, conds=[(1, EQ, "France")]),
        "{not json",
        _question("which city has more than 3000000 people?", 0, conds=[(2, GT, 3000000)]),
        _question("what is in the ragged table?", 0, table_id="2-20"),
    ]) + "\n")
    (data / "dev.tables.jsonl").write_text(json.dumps(TABLE) + "\n")
    (data / "dev.jsonl").write_text("\n".join([
        _question("which city is in germany?", 0, conds=[(1, EQ, "Germany")]),
        _question("what is the largest population?", 2, MAX),
    ]) + "\n")
    return data


def _run_task(task, *args, cwd):
    return subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), f"--task={task}", *args],
                          capture_output=True, text=True, timeout=400, cwd=str(cwd))


def _create_data(task, data, out, vocab, tmp_path):
    result = _run_task(task, "--mode=create_data", f"--input_dir={data}", f"--output_dir={out}",
                       f"--vocab_file={vocab}", "--max_seq_length=128", "--direct_num_workers=1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.load(open(out / REPORT_FILE))


def test_create_data_accounts_for_both_files_and_sets_the_answers(tmp_path):
    data, vocab = _wikisql_release(tmp_path), write_test_vocab(str(tmp_path / "vocab.txt"))
    report = _create_data("WIKISQL_SUPERVISED", data, tmp_path / "sup", vocab, tmp_path)
    train, dev = report["splits"]["train"], report["splits"]["dev"]
    # 6 question lines + 2 table lines: 4 questions + 1 table, 1 bad JSON line and 1 ragged table line;
    # the question on the ragged table is read and skipped with the table's reason.
    assert train["lines_read"] == 8
    assert train["lines"] == {"header": 0, "questions": 5, "tables": 1,
                              "skipped": {"malformed_line": 1, "bad_table": 1}}
    assert (train["questions_read"], train["examples_written"], train["skipped"]) == (5, 4, {"bad_table": 1})
    assert train["adds_up"] and dev["adds_up"] and dev["examples_written"] == 2
    # Released answers (where a line has one) against the executed SQL: the count 3 is wrong.
    assert train["reader"] == {"release_answers_compared": 2, "differs_from_release": 1}
    failures = (tmp_path / "sup" / "failures" / "train.tsv").read_text().splitlines()[1:]
    assert sorted(line.split("\t")[3] for line in failures) == ["bad_table", "bad_table", "malformed_line"]

    supervised = {i.id: i.questions[0].answer
                  for i in read_interactions(str(tmp_path / "sup" / "interactions" / "train.tfrecord"))}
    assert supervised["train-1"].aggregation_function == 3  # COUNT, the gold operator.
    assert [(c.row_index, c.column_index) for c in supervised["train-1"].answer_coordinates] == [(0, 0), (1, 0)]
    assert supervised["train-2"].aggregation_function == 1 and supervised["train-2"].float_value == 2661000

    _create_data("WIKISQL", data, tmp_path / "weak", vocab, tmp_path)
    weak = {i.id: i.questions[0].answer
            for i in read_interactions(str(tmp_path / "weak" / "interactions" / "train.tfrecord"))}
    assert weak["train-1"].aggregation_function == 0 and weak["train-1"].float_value == 2  # To be learned.


def test_wikisql_supervised_trains_predicts_and_evaluates(tmp_path):
    data, vocab = _wikisql_release(tmp_path), write_test_vocab(str(tmp_path / "vocab.txt"))
    out, model = tmp_path / "out", tmp_path / "model"
    _create_data("WIKISQL_SUPERVISED", data, out, vocab, tmp_path)
    common = (f"--vocab_file={vocab}", "--max_seq_length=128")
    trained = _run_task("WIKISQL_SUPERVISED", "--mode=train", f"--output_dir={out}", f"--model_dir={model}",
                        "--model_size=tiny", f"--model_option=vocab_size={len(vocab_tokens())}",
                        "--train_steps=3", "--train_batch_size=2", "--noprogress_bar", *common, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    config = json.load(open(model / "tapas_config.json"))
    assert (config["num_aggregation_labels"], config["use_answer_as_supervision"],
            config["select_one_column"]) == (4, False, False)
    result = _run_task("WIKISQL_SUPERVISED", "--mode=predict_and_evaluate", f"--output_dir={out}",
                       f"--model_dir={model}", *common, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(model / "predictions" / "dev_metrics.json"))
    assert (metrics["num_questions"], metrics["num_conversion_failures"]) == (2, 0)
    assert metrics["denotation_accuracy"] == metrics["num_correct"] / 2
    assert len((model / "predictions" / "dev.tsv").read_text().splitlines()) == 3  # Header and 2 questions.
