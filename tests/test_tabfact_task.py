"""The TABFACT task through the task command line: the release's layout in (a missing split skipped
with a note, a bad entry and a missing table counted), a tiny classifier trained, and dev scored by
accuracy with per-label precision and recall."""

import json

import numpy as np
import tensorflow as tf

from tapas_tf.pipelines.reports import REPORT_FILE
from tests.data.test_tabfact_reader import SPLIT
from tests.test_run_task_cli import run_task
from tests.vocab_fixture import vocab_tokens, write_test_vocab

TRAIN = {"t1.csv": [["paris has more people than rome", "rome has more people than paris"],
                    [1, 0], "capitals"],
         "t2.csv": [["the tallest pylon is a", "the tallest pylon is c"], [1, 0], "pylons"]}


def _run(*args, cwd):
    return run_task("--task=TABFACT", *args, cwd=cwd)


def _release(root):
    (root / "all_csv").mkdir(parents=True)
    (root / "all_csv" / "t1.csv").write_text("city#population\nparis#2,100\nrome#2,800\n")
    (root / "all_csv" / "t2.csv").write_text("pylon#height\na#310\nb#295\nc#270\n")
    (root / "all_csv" / "1-1.html.csv").write_text("city#population\nparis#2,100\nrome#2,800\n")
    (root / "all_csv" / "1-2.html.csv").write_text("a#b\n1#2\n")
    (root / "train_examples.json").write_text(json.dumps(TRAIN, indent=1))
    (root / "val_examples.json").write_text(SPLIT)  # A malformed entry and a missing table.


def test_statements_become_labelled_examples_a_classifier_trains_on_and_is_scored(tmp_path):
    release, out, model = tmp_path / "tabfact", tmp_path / "out", tmp_path / "model"
    _release(release)
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    result = _run("--mode=create_data", f"--input_dir={release}", f"--output_dir={out}",
                  f"--vocab_file={vocab}", "--direct_num_workers=1", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test_examples.json not found; split test skipped" in result.stderr
    report = json.loads((out / REPORT_FILE).read_text())["splits"]
    assert set(report) == {"train", "dev"} and report["train"]["adds_up"] and report["dev"]["adds_up"]
    assert (report["train"]["examples_written"] == 4
            and report["train"]["reader"] == {"entailed": 2, "refuted": 2})
    dev = report["dev"]
    assert (dev["questions_read"], dev["examples_written"]) == (4, 2)
    assert dev["lines"]["skipped"] == {"malformed_entry": 9}
    failures = (out / "failures" / "dev.tsv").read_text()
    assert "malformed_entry" in failures and failures.count("missing_table") == 2
    labels = [tf.train.Example.FromString(r.numpy())
              .features.feature["classification_class_index"].int64_list.value[0]
              for r in tf.data.TFRecordDataset(str(out / "tf_examples" / "train.tfrecord"))]
    assert sorted(labels) == [0, 0, 1, 1]

    result = _run("--mode=train", f"--output_dir={out}", f"--model_dir={model}", "--model_size=tiny",
                  f"--model_option=vocab_size={len(vocab_tokens())}", "--train_steps=2",
                  "--train_batch_size=2", "--save_checkpoints_steps=2", "--noprogress_bar", "--seed=1",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((model / "tapas_config.json").read_text())
    assert (config["num_classification_labels"], config["disable_per_token_loss"],
            config["num_aggregation_labels"]) == (2, True, 0)

    result = _run("--mode=predict_and_evaluate", f"--output_dir={out}", f"--model_dir={model}",
                  f"--vocab_file={vocab}", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((model / "predictions" / "dev_metrics.json").read_text())
    assert metrics["num_statements"] == 2 and metrics["num_not_converted"] == 0
    rows = (model / "predictions" / "dev.tsv").read_text().splitlines()
    assert rows[0] == "question_id\tlabel\tpredicted\tprobability" and len(rows) == 3
    predicted = [(int(r.split("\t")[1]), int(r.split("\t")[2]), float(r.split("\t")[3])) for r in rows[1:]]
    assert all(p == int(prob >= 0.5) for _, p, prob in predicted)
    assert metrics["accuracy"] == np.mean([label == p for label, p, _ in predicted])
    assert set(metrics["per_label"]) == {"refuted", "entailed"}
