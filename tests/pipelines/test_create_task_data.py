"""The create_data Beam job and CLI, end to end on the sample data set plus bad input."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tapas_tf.beam_jobs.create_task_data import REPORT_FILE, run_create_data
from tapas_tf.data.interaction_io import read_interactions
from tapas_tf.data.sample_data import write_sample
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.features.example_features import ints_to_question_id, parsing_spec
from tapas_tf.tasks import Task
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
    assert train["questions_read"] == 10  # 9 sample questions + the 600-piece one.
    assert train["examples_written"] == 9
    assert train["dropped"] == {"question_too_long": 1}
    assert train["skipped"] == {"malformed_line": 1, "missing_table": 1}
    assert (dev["questions_read"], dev["examples_written"]) == (4, 4)
    assert (test["questions_read"], test["examples_written"]) == (1, 1)
    assert json.load(open(out / REPORT_FILE))["splits"]["train"]["examples_written"] == 9


def test_failures_file_gives_each_reason(job):
    _, out = job
    lines = (out / "failures" / "train.tsv").read_text().splitlines()
    assert lines[0] == "where\treason\tmessage"
    reasons = sorted(line.split("\t")[1] for line in lines[1:])
    assert reasons == ["malformed_line", "missing_table", "question_too_long"]
    assert any("s-9-0_0" in line for line in lines)


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


def test_cli_usage_errors(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA",
                             "--mode=create_data"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "--input_dir" in result.stderr
