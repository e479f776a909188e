"""The create_data Beam job and CLI, end to end on the sample data set plus bad input."""

import json
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

from tapas_tf.beam_jobs.create_task_data import REPORT_FILE, run_create_data
from tapas_tf.data.interaction_io import read_interactions
from tapas_tf.data.sample_data import write_sample
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.features.example_features import ints_to_question_id, parsing_spec
from tapas_tf.task_registry.presets import Task
from tests.command_runner import TAPAS_TF
from tests.vocab_fixture import write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read_examples(path, max_seq_length):
    spec = parsing_spec(max_seq_length)
    return [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Runs the job once on the sample plus a malformed line, a bad table and a too-long question."""
    data = tmp_path_factory.mktemp("data")
    write_sample(str(data))
    with open(data / "random-split-1-train.tsv", "a", encoding="utf-8") as f:
        f.write("bad\tline\n")
        f.write("s-8\t0\t0\twhat?\ttable_csv/missing.csv\t['(0, 0)']\t['x']\n")
        f.write("s-9\t0\t0\t" + "hello " * 600 + "\ttable_csv/cities.csv\t['(0, 0)']\t['Paris']\n")
    out = tmp_path_factory.mktemp("out")
    vocab = write_test_vocab(str(out / "vocab.txt"))
    config = ConversionConfig(vocab_file=vocab, max_seq_length=256)
    report = run_create_data(Task.SQA, str(data), str(out), config, ["--direct_num_workers=1"])
    return report, out


def test_report_counts_every_question_and_drop(job):
    report, out = job
    train, dev, test = (report["splits"][s] for s in ("train", "dev", "test"))
    # 10 sample lines (header + 9 questions) + a malformed line + 2 questions.
    assert train["lines_read"] == 13
    assert train["lines"] == {"header": 1, "questions": 11, "tables": 0, "skipped": {"malformed_line": 1}}
    assert train["questions_read"] == 11  # 9 sample questions + the missing-table and 600-piece ones.
    assert train["examples_written"] == 9
    assert train["dropped"] == {"question_too_long": 1}
    assert train["skipped"] == {"missing_table": 1}
    assert train["adds_up"] is True
    assert train["fraction_converted"] == 0.75  # 9 of 11 questions + 1 unreadable line.
    assert (dev["questions_read"], dev["examples_written"]) == (4, 4)
    assert (test["questions_read"], test["examples_written"]) == (1, 1)
    assert json.load(open(out / REPORT_FILE))["splits"]["train"]["examples_written"] == 9


def test_failures_file_gives_each_reason(job):
    _, out = job
    lines = (out / "failures" / "train.tsv").read_text().splitlines()
    assert lines[0] == "file\tlines\tquestion_id\treason\tmessage"
    rows = sorted(line.split("\t")[1:4] for line in lines[1:])
    # The malformed line and the missing table's question are named by line; the conversion
    # drop by question id.
    assert rows == [["", "s-9-0_0", "question_too_long"], ["11", "", "malformed_line"],
                    ["12", "s-8-0_0", "missing_table"]]
    assert all(line.split("\t")[0].endswith("random-split-1-train.tsv") for line in lines[1:])


def test_outputs_parse(job):
    _, out = job
    interactions = list(read_interactions(str(out / "interactions" / "dev.tfrecord")))
    assert sorted(i.id for i in interactions) == ["s-5-0", "s-6-0"]
    # Numbers were annotated: "1,897,000" is a float.
    vienna = [i for i in interactions if i.id == "s-5-0"][0].table.rows[4].cells[2]
    assert vienna.numeric_value.float_value == 1897000.0
    examples = _read_examples(str(out / "tf_examples" / "dev.tfrecord"), 256)
    ids = sorted(ints_to_question_id(e["question_id_ints"].numpy()) for e in examples)
    assert ids == ["s-5-0_0", "s-5-0_1", "s-6-0_0", "s-6-0_1"]
    assert sorted(e["question_id"].numpy()[0].decode() for e in examples) == ids
    for e in examples:
        assert int(e["label_ids"].numpy().sum()) >= 1


def test_cli_create_data(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    write_sample(str(data))
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA", "--mode=create_data",
         f"--input_dir={data}", f"--output_dir={out}", f"--vocab_file={vocab}", "--max_seq_length=256",
         "--direct_num_workers=1"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.load(open(out / REPORT_FILE))
    assert report["splits"]["train"]["examples_written"] == 9
    assert report["config"]["max_seq_length"] == 256
    assert "train: 9 of 9 questions converted" in result.stderr
    # stderr is no terminal here: the progress is a log line (every 30 s, and when the job is done).
    done = (r"^I \d\d:\d\d:\d\d progress\.py:\d+\] create_data done: 14 questions, 7 interactions "
            r"\[\d\d:\d\d, [\d.]+ questions/s\]$")
    assert re.search(done, result.stderr, re.MULTILINE), result.stderr[-3000:]


def test_cli_usage_errors(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA",
                             "--mode=create_data"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "--input_dir" in result.stderr


# --- Every line accounted for, whatever the input ----------------------------------------------

SQA_HEADER = "id\tannotator\tposition\tquestion\ttable_file\tanswer_coordinates\tanswer_text"


def _question_line(n: int, table: str = "table_csv/cities.csv", coordinates: str = "['(0, 0)']") -> str:
    return f"q-{n}\t0\t0\twhich city is number {n}?\t{table}\t{coordinates}\t['Paris']"


def _release(tmp_path, dev_lines):
    """The sample release with `random-split-1-dev.tsv` replaced by `dev_lines` (str or bytes)."""
    data = tmp_path / "data"
    write_sample(str(data))
    (data / "random-split-1-dev.tsv").write_bytes(b"".join(
        (line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n" for line in dev_lines))
    return data


def _run(tmp_path, data):
    out = tmp_path / "out"
    config = ConversionConfig(vocab_file=write_test_vocab(str(tmp_path / "vocab.txt")), max_seq_length=128)
    return run_create_data(Task.SQA, str(data), str(out), config, ["--direct_num_workers=1"]), out


def test_a_bad_byte_at_line_251_costs_one_line_and_the_report_adds_up(tmp_path):
    lines = [SQA_HEADER] + [_question_line(n) for n in range(300)]
    lines[250] = lines[250].replace("which", "caf\xe9 which").encode("latin-1")
    report, out = _run(tmp_path, _release(tmp_path, lines))
    dev = report["splits"]["dev"]
    assert dev["lines_read"] == 301
    assert dev["lines"] == {"header": 1, "questions": 299, "tables": 0, "skipped": {"invalid_utf8": 1}}
    assert (dev["questions_read"], dev["examples_written"]) == (299, 299)
    assert dev["adds_up"] is True
    assert dev["fraction_converted"] == round(299 / 300, 6)
    [failure] = (out / "failures" / "dev.tsv").read_text().splitlines()[1:]
    assert failure.split("\t")[1:4] == ["251", "", "invalid_utf8"]


def test_every_kind_of_bad_line_is_counted_and_the_job_goes_on(tmp_path):
    data = _release(tmp_path, [
        SQA_HEADER,
        _question_line(0),
        _question_line(1, coordinates="['(0, 99999999999)']"),  # Beyond int32: an invalid answer.
        _question_line(2, table="table_csv"),  # A directory, not a table file.
        "",
        _question_line(3).replace("which city", '"which city'),  # A stray quote.
        _question_line(4),
        _question_line(5),
        "too\tfew\tfields",
        _question_line(6, table="../../etc/passwd"),
    ])
    report, out = _run(tmp_path, data)
    dev = report["splits"]["dev"]
    assert dev["lines_read"] == 10
    assert dev["lines"] == {"header": 1, "questions": 6, "tables": 0, "skipped": {"blank_line": 1, "malformed_line": 2}}
    assert dev["skipped"] == {"bad_table_path": 1, "unreadable_table": 1}
    # The unusable answer is read, then dropped by conversion.
    assert dev["dropped"] == {"invalid_answer": 1}
    assert dev["questions_read"] == 6 and dev["examples_written"] == 3
    assert dev["adds_up"] is True
    failures = [line.split("\t") for line in (out / "failures" / "dev.tsv").read_text().splitlines()[1:]]
    assert sorted((f[1], f[2], f[3]) for f in failures) == [
        ("", "q-1-0_0", "invalid_answer"), ("10", "q-6-0_0", "bad_table_path"), ("4", "q-2-0_0", "unreadable_table"),
        ("5", "", "blank_line"), ("6", "", "malformed_line"), ("9", "", "malformed_line")]
    # The other splits were converted as usual.
    train = report["splits"]["train"]
    assert train["questions_read"] == 9 and train["adds_up"] is True


def test_a_missing_required_column_refuses_the_job_before_it_starts(tmp_path):
    data = _release(tmp_path, ["id\tannotator\tposition\tquestion\ttable_file\tanswer_text", "q\t0\t0\tx\ty\tz"])
    with pytest.raises(ValueError, match=r"random-split-1-dev.tsv:1: the header lacks the column\(s\) "
                                         r"answer_coordinates"):
        _run(tmp_path, data)
    assert not (tmp_path / "out" / REPORT_FILE).exists()


# --- WikiTableQuestions: answers are texts; cells come from weak supervision --------------------

WTQ_TABLE = "City\tCountry\tPopulation\nParis\tFrance\t2,148,000\nLyon\tFrance\t513,000\nBerlin\tGermany\t3,645,000\n"
WTQ_HEADER = "id\tutterance\tcontext\ttargetValue"


def _wtq_release(tmp_path):
    data = tmp_path / "wtq"
    (data / "csv" / "200-csv").mkdir(parents=True)
    (data / "csv" / "200-csv" / "0.tsv").write_text(WTQ_TABLE)
    (data / "random-split-1-train.tsv").write_text("\n".join([
        WTQ_HEADER,
        "nt-0\twhich city is in germany?\tcsv/200-csv/0.csv\tBerlin",      # one cell
        "nt-1\twhich cities are in france?\tcsv/200-csv/0.csv\tParis|Lyon",  # two distinct cells
        "nt-2\twhat is the capital of italy?\tcsv/200-csv/0.csv\tRome",      # no cell, no number: dropped
        "nt-3\twhich country has two cities?\tcsv/200-csv/0.csv\tFrance",    # two equal cells: dropped
        "nt-4\thow many cities?\tcsv/200-csv/0.csv\t3",                      # a number: kept, no cells
    ]) + "\n")
    (data / "random-split-1-dev.tsv").write_text("\n".join([
        WTQ_HEADER,
        "nt-5\twhich city is largest?\tcsv/200-csv/0.csv\tBerlin",
        "nt-6\twhat is the capital of italy?\tcsv/200-csv/0.csv\tRome",      # kept: predicted, counted wrong
    ]) + "\n")
    return data


def test_cli_create_data_for_wtq_keeps_every_dev_question_and_counts_train_drops(tmp_path):
    data, out = _wtq_release(tmp_path), tmp_path / "out"
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_task.py"), "--task=WTQ", "--mode=create_data",
         f"--input_dir={data}", f"--output_dir={out}", f"--vocab_file={vocab}", "--max_seq_length=128",
         "--direct_num_workers=1"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.load(open(out / REPORT_FILE))
    train, dev = report["splits"]["train"], report["splits"]["dev"]
    assert (train["questions_read"], train["examples_written"]) == (5, 3)
    assert train["skipped"] == {"answer_no_match": 1, "answer_ambiguous": 1}
    assert train["adds_up"] and dev["adds_up"]
    assert (dev["questions_read"], dev["examples_written"], dev["skipped"]) == (2, 2, {})
    failures = (out / "failures" / "train.tsv").read_text().splitlines()
    assert [line.split("\t")[2:4] for line in failures[1:]] == [["nt-2_0", "answer_no_match"],
                                                                ["nt-3_0", "answer_ambiguous"]]
    interactions = {i.id: i for i in read_interactions(str(out / "interactions" / "train.tfrecord"))}
    answers = {key: interactions[key].questions[0].answer for key in interactions}
    assert sorted(answers) == ["nt-0", "nt-1", "nt-4"]
    assert [(c.row_index, c.column_index) for c in answers["nt-0"].answer_coordinates] == [(2, 0)]
    assert sorted((c.row_index, c.column_index) for c in answers["nt-1"].answer_coordinates) == [(0, 0), (1, 0)]
    assert list(answers["nt-4"].answer_coordinates) == [] and answers["nt-4"].float_value == 3.0
    dev_answers = {i.id: i.questions[0].answer for i in read_interactions(str(out / "interactions" / "dev.tfrecord"))}
    assert list(dev_answers["nt-6"].answer_coordinates) == [] and list(dev_answers["nt-6"].answer_texts) == ["Rome"]


def test_wtq_train_release_file_replaces_the_train_split(tmp_path):
    data = _wtq_release(tmp_path)
    (data / "random-split-1-train.tsv").rename(data / "training.tsv")
    config = ConversionConfig(vocab_file=write_test_vocab(str(tmp_path / "vocab.txt")), max_seq_length=128)
    report = run_create_data(Task.WTQ, str(data), str(tmp_path / "out"), config, ["--direct_num_workers=1"],
                             train_file_name="training.tsv")
    assert (report["splits"]["train"]["questions_read"], report["splits"]["train"]["examples_written"]) == (5, 3)
    with pytest.raises(FileNotFoundError, match="no-such.tsv: required train file of WTQ"):
        run_create_data(Task.WTQ, str(data), str(tmp_path / "out2"), config, train_file_name="no-such.tsv")


# --- Tables too big to fit: evaluation splits drop rows, training drops the question -----------

# 40 body rows: with --max_seq_length=64 not even one token per cell fits.
BIG_TABLE = "City\tCountry\tPopulation\n" + "".join(f"city{i}\tcountry{i}\t{1000 + i}\n" for i in range(40))
BIG_SEQ = 64


def _wtq_big_table_release(tmp_path):
    """The small WTQ release plus one question per split on a table too big for BIG_SEQ tokens."""
    data = _wtq_release(tmp_path)
    (data / "csv" / "200-csv" / "1.tsv").write_text(BIG_TABLE)
    with open(data / "random-split-1-train.tsv", "a", encoding="utf-8") as f:
        f.write("nt-10\twhich city is first?\tcsv/200-csv/1.csv\tcity0\n")
    with open(data / "random-split-1-dev.tsv", "a", encoding="utf-8") as f:
        f.write("nt-11\twhich city comes first?\tcsv/200-csv/1.csv\tcity0\n")
    return data


def _create(tmp_path, data, drop_rows_to_fit):
    config = ConversionConfig(vocab_file=write_test_vocab(str(tmp_path / "vocab.txt")), max_seq_length=BIG_SEQ,
                              drop_rows_to_fit=drop_rows_to_fit)
    return run_create_data(Task.WTQ, str(data), str(tmp_path / "out"), config, ["--direct_num_workers=1"])


def test_for_split_drops_rows_by_default_for_evaluation_only(tmp_path):
    config = ConversionConfig(vocab_file="vocab.txt", drop_rows_to_fit=None)
    assert (config.for_split(is_training=False).drop_rows_to_fit, config.for_split(True).drop_rows_to_fit) == (
        True, False)
    assert (config.for_split(False).fail_on_dropped_answers, config.for_split(True).fail_on_dropped_answers) == (
        False, True)
    for setting in (True, False):
        fixed = ConversionConfig(vocab_file="vocab.txt", drop_rows_to_fit=setting)
        assert fixed.for_split(False).drop_rows_to_fit is fixed.for_split(True).drop_rows_to_fit is setting
    with pytest.raises(ValueError, match="for_split"):
        from tapas_tf.features.classifier_examples import ExampleConverter

        ExampleConverter(config, tokenizer=object())


def test_cli_default_keeps_every_dev_question_and_says_so(tmp_path):
    """run_task.py without --drop_rows_to_fit: dev drops rows of the big table, train drops its question."""
    data, out = _wtq_big_table_release(tmp_path), tmp_path / "out"
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TAPAS_TF_DEBUG")}
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_task.py"), "--task=WTQ", "--mode=create_data",
         f"--input_dir={data}", f"--output_dir={out}", f"--vocab_file={vocab}", f"--max_seq_length={BIG_SEQ}",
         "--direct_num_workers=1"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.load(open(out / REPORT_FILE))
    assert report["config"]["drop_rows_to_fit"] is None
    train, dev = report["splits"]["train"], report["splits"]["dev"]
    assert (dev["questions_read"], dev["examples_written"], dev["dropped"]) == (3, 3, {})
    assert dev["drop_rows_to_fit"]["enabled"] and dev["drop_rows_to_fit"]["by_default"]
    assert dev["drop_rows_to_fit"]["questions"] == 1 and 0 < dev["drop_rows_to_fit"]["rows"] < 40
    assert dev["limits"]["examples_with_rows_dropped"] == 1
    # Train as before: the question on the big table is dropped and counted.
    assert (train["questions_read"], train["examples_written"]) == (6, 3)
    assert train["dropped"] == {"sequence_too_long": 1}
    assert train["drop_rows_to_fit"] == {"enabled": False, "by_default": True, "questions": 0, "rows": 0}
    assert train["adds_up"] and dev["adds_up"]
    # The log says it, in plain lines; TensorFlow's C++ start-up lines are hidden.
    dev_line = [line for line in result.stderr.splitlines() if "] dev: " in line][0]
    assert re.match(r"I \d\d:\d\d:\d\d task_modes\.py:\d+\] dev: 3 of 3 questions converted", dev_line), dev_line
    assert dev_line.endswith("rows dropped to fit in 1 question (the default for evaluation splits)")
    train_line = [line for line in result.stderr.splitlines() if "] train: " in line][0]
    assert train_line.endswith("rows not dropped to fit (the default for training splits; questions that do "
                               "not fit are dropped)")
    assert not re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] ", result.stderr, re.MULTILINE)
    assert "oneDNN" not in result.stderr and "cuda" not in result.stderr


def test_create_data_nodrop_rows_to_fit_drops_and_counts_dev_questions_as_before(tmp_path):
    """tapas-tf create-data --nodrop_rows_to_fit: today's drop-and-count, for dev too."""
    data, out = _wtq_big_table_release(tmp_path), tmp_path / "out"
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TAPAS_TF_DEBUG")}
    result = subprocess.run(
        [*TAPAS_TF, "create-data", "--task=WTQ",
         f"--input_dir={data}", f"--output_dir={out}", f"--vocab_file={vocab}", f"--max_seq_length={BIG_SEQ}",
         "--nodrop_rows_to_fit", "--direct_num_workers=1"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    dev = json.load(open(out / REPORT_FILE))["splits"]["dev"]
    assert (dev["questions_read"], dev["examples_written"], dev["dropped"]) == (3, 2, {"sequence_too_long": 1})
    assert dev["drop_rows_to_fit"] == {"enabled": False, "by_default": False, "questions": 0, "rows": 0}
    failures = (out / "failures" / "dev.tsv").read_text().splitlines()
    assert [line.split("\t")[2:4] for line in failures[1:]] == [["nt-11_0", "sequence_too_long"]]
    assert not re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] ", result.stderr, re.MULTILINE)
    assert not re.search(r"^[IWE]\d{4} ", result.stderr, re.MULTILINE)  # No absl thread-id prefixes.


def test_drop_rows_to_fit_for_every_split_converts_the_training_question_too(tmp_path):
    report = _create(tmp_path, _wtq_big_table_release(tmp_path), drop_rows_to_fit=True)
    train, dev = report["splits"]["train"], report["splits"]["dev"]
    assert (train["examples_written"], train["dropped"]) == (4, {})  # city0 is in the first row, kept.
    assert train["drop_rows_to_fit"]["enabled"] and not train["drop_rows_to_fit"]["by_default"]
    assert train["drop_rows_to_fit"]["questions"] == 1
    assert (dev["examples_written"], dev["drop_rows_to_fit"]["questions"]) == (3, 1)
