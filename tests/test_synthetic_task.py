"""The SYNTHETIC task through the task command line: tables in, examples with gold cells and
operators out, a tiny model trained on them and scored by denotation."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from tapas_tf.data import interaction_io, synthetic_questions
from tapas_tf.data.readers.common import make_table
from tapas_tf.pipelines.reports import REPORT_FILE
from tests.vocab_fixture import vocab_tokens, write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tables_file(path, tables):
    interaction_io.write_interactions(str(path), [synthetic_questions.to_interaction(t, [], t.table_id) for t in tables])


def _run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SYNTHETIC", *args],
                          cwd=str(cwd), env=env, capture_output=True, text=True, timeout=600)


def test_tables_become_supervised_examples_a_model_trains_on_and_is_scored(tmp_path):
    medals = make_table("medals", ["Nation", "Gold", "Silver"],
                        [["norway", "4", "2"], ["sweden", "3", "3"], ["finland", "1", "5"], ["denmark", "0", "1"]])
    pylons = make_table("pylons", ["Pylon", "Height", "Year"],
                        [["a", "310", "1931"], ["b", "295", "1931"], ["c", "270", "1967"]])
    unusable = make_table("unusable", ["", ""], [["1", "2"]])
    tables = tmp_path / "tables"
    _tables_file(tables / "train.tfrecord", [medals, pylons, pylons, unusable])
    _tables_file(tables / "dev.tfrecord", [pylons])
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    out, model = tmp_path / "out", tmp_path / "model"

    result = _run("--mode=create_data", f"--input_dir={tables}", f"--output_dir={out}", f"--vocab_file={vocab}",
                  "--direct_num_workers=1", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    train = json.loads((out / REPORT_FILE).read_text())["splits"]["train"]
    assert train["adds_up"] and train["lines_read"] == 4
    assert train["lines"]["questions"] == 2
    assert train["lines"]["skipped"] == {"duplicate_table": 1, "no_synthetic_question": 1}
    assert train["examples_written"] == train["questions_read"] > 20
    assert sum(v for k, v in train["reader"].items() if k.startswith("kind_")) == train["questions_read"]
    failures = (out / "failures" / "train.tsv").read_text().splitlines()[1:]
    assert sorted((row.split("\t")[1], row.split("\t")[3]) for row in failures) == [
        ("3", "duplicate_table"), ("4", "no_synthetic_question")]

    aggregations, counted = set(), 0
    for record in tf.data.TFRecordDataset(str(out / "tf_examples" / "train.tfrecord")):
        features = tf.train.Example.FromString(record.numpy()).features.feature
        aggregation = features["aggregation_function_id"].int64_list.value[0]
        labels = np.asarray(features["label_ids"].int64_list.value)
        aggregations.add(aggregation)
        assert labels.sum() > 0  # Every example names its cells.
        if aggregation == 3:  # COUNT: the number is the count of the labelled cells' rows.
            counted += 1
            assert not np.isnan(features["answer"].float_list.value[0])
    assert aggregations >= {0, 3} and counted

    result = _run("--mode=train", f"--output_dir={out}", f"--model_dir={model}", "--model_size=tiny",
                  f"--model_option=vocab_size={len(vocab_tokens())}", "--train_steps=2", "--train_batch_size=4",
                  "--save_checkpoints_steps=2", "--noprogress_bar", "--seed=1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((model / "tapas_config.json").read_text())
    assert (config["num_aggregation_labels"], config["use_answer_as_supervision"], config["select_one_column"]) == (
        4, False, True)

    result = _run("--mode=predict_and_evaluate", f"--output_dir={out}", f"--model_dir={model}",
                  f"--vocab_file={vocab}", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((model / "predictions" / "dev_metrics.json").read_text())
    dev = json.loads((out / REPORT_FILE).read_text())["splits"]["dev"]
    assert metrics["num_questions"] == dev["examples_written"] > 0
    assert metrics["denotation_accuracy"] == metrics["num_correct"] / metrics["num_questions"]
