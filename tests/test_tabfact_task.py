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

    # evaluate scores the predictions file again against the split's labels.
    (model / "predictions" / "dev_metrics.json").unlink()
    result = _run("--mode=evaluate", f"--output_dir={out}", f"--model_dir={model}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    again = json.loads((model / "predictions" / "dev_metrics.json").read_text())
    assert again["accuracy"] == metrics["accuracy"] and again["num_missing"] == 0
    missing = tmp_path / "missing.tsv"
    missing.write_text("\n".join(rows[:2]) + "\n")  # One statement has no prediction: it counts as wrong.
    result = _run("--mode=evaluate", f"--output_dir={out}", f"--model_dir={model}",
                  f"--predictions_file={missing}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    partial = json.loads((model / "predictions" / "dev_metrics.json").read_text())
    assert partial["num_missing"] == 1 and partial["num_statements"] == 2
    assert partial["accuracy"] == (predicted[0][0] == predicted[0][1]) / 2
    missing.write_text("question_id\tlabel\n")
    result = _run("--mode=evaluate", f"--output_dir={out}", f"--model_dir={model}",
                  f"--predictions_file={missing}", cwd=tmp_path)
    assert result.returncode == 1 and "not a statement predictions file" in result.stderr

    # The verify command line on the trained model: P(entailed) as the Python API gives it.
    from tapas_tf.qa.fact_checker import TableFactChecker

    (tmp_path / "capitals.csv").write_text('city,population\nparis,"2,100"\nrome,"2,800"\n')
    statements = ["paris has more people than rome", "rome has more people than paris"]
    flags = [f"--table={tmp_path / 'capitals.csv'}", f"--model_dir={model}", f"--vocab_file={vocab}"]
    result = _verify(*flags, "--json", input="\n".join(statements) + "\n", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    checker = TableFactChecker.from_model_dir(str(model), vocab_file=vocab, backend="tensorflow")
    assert [line["statement"] for line in lines] == statements
    for line, statement in zip(lines, statements):
        expected = checker.verify(str(tmp_path / "capitals.csv"), statement)
        assert abs(line["probability"] - expected.probability) < 1e-5
        assert line["entailed"] == expected.entailed and line["verdict"] in ("entailed", "refuted")
    result = _verify(*flags, statements[0], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"S: {statements[0]}\nV: {lines[0]['verdict']} (P(entailed) = ")
    assert "0 | paris | 2,100" in result.stdout and "1 | rome  | 2,800" in result.stdout
    result = _verify(*flags[1:], statements[0], cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == (
        "tapas-tf verify: error: --table is required (tapas-tf verify --help lists the flags)")


def _verify(*args, cwd, input=None):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "tapas_tf.commands.dispatch", "verify", *args], cwd=str(cwd), input=input,
                          capture_output=True, text=True, timeout=300)


def _make_statements(*args, cwd):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "tapas_tf.commands.dispatch", "make-statements", *args], cwd=str(cwd),
                          capture_output=True, text=True, timeout=300)


def test_make_statements_writes_a_release_that_create_data_reads(tmp_path):
    release, statements, out = tmp_path / "tabfact", tmp_path / "statements", tmp_path / "out"
    (release / "all_csv").mkdir(parents=True)
    (release / "all_csv" / "t1.csv").write_text("name#team#points\nalice#red#30\nbob#blue#25\ncarol#red#40\n")
    (release / "all_csv" / "t2.csv").write_text("pylon#height\na#310\nb#295\nc#270\n")
    (release / "train_examples.json").write_text(json.dumps({
        "t1.csv": [["alice scored 30 points", "alice scored 25 points"], [1, 0], "scores"],
        "t2.csv": [["the tallest pylon is a", "the tallest pylon is c"], [1, 0], "pylons"],
        "t3.csv": [["a statement on a missing table"], [1], "gone"]}))
    result = _make_statements(f"--input_dir={release}", f"--output_dir={statements}", "--pairs_per_table=3",
                              "--holdout_tables=1", "--seed=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((statements / "statements_report.json").read_text())
    made = json.loads((statements / "train_examples.json").read_text())
    held_out = json.loads((statements / "test_examples.json").read_text())
    assert report["tables_held_out"] == 1 and len(held_out) == 1 and not set(held_out) & set(made)
    assert report["tables_read"] == 2
    assert report["tables_skipped"] == ({} if "t3.csv" in held_out else {"missing_table": 1})
    labels = [label for entry in made.values() for label in entry[1]]
    assert labels.count(1) == labels.count(0) > 0  # Pairs: as many true as false.
    counted = sum(sum(by_label.values()) for by_label in report["statements"].values())
    assert counted == report["total"] == len(labels)
    if "t1.csv" in made:  # Its entailed statement's twin names bob or carol, beside the original.
        texts = made["t1.csv"][0]
        assert "alice scored 30 points" in texts
        assert {"bob scored 30 points", "carol scored 30 points"} & set(texts)
    assert (statements / "all_csv").resolve() == (release / "all_csv").resolve()

    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    result = _run("--mode=create_data", f"--input_dir={statements}", f"--output_dir={out}",
                  f"--vocab_file={vocab}", "--direct_num_workers=1", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    splits = json.loads((out / REPORT_FILE).read_text())["splits"]
    assert splits["train"]["examples_written"] == len(labels)
    assert splits["test"]["questions_read"] == sum(len(entry[0]) for entry in held_out.values())


def test_make_statements_errors_name_the_file(tmp_path):
    result = _make_statements(f"--input_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}", cwd=tmp_path)
    assert result.returncode != 0 and "train_examples.json: file not found" in result.stderr
    (tmp_path / "train_examples.json").write_text(json.dumps({"t.csv": ["only one part"]}))
    result = _make_statements(f"--input_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}", cwd=tmp_path)
    assert result.returncode != 0 and "entry 't.csv' is not [statements, labels, caption]" in result.stderr


def test_make_statements_takes_only_train_tables_and_lists_them(tmp_path):
    """The training-data rule: a TabFact table outside train_examples.json gives no statement, is
    counted by reason, and the tables used are the run's manifest."""
    from tapas_tf.data.table_manifest import read_manifest

    release, statements = tmp_path / "tabfact", tmp_path / "statements"
    (release / "all_csv").mkdir(parents=True)
    for name in ("1-1-1.html.csv", "1-1-2.html.csv", "1-1-3.html.csv"):
        (release / "all_csv" / name).write_text("pylon#height\na#310\nb#295\nc#270\n")
    (release / "train_examples.json").write_text(json.dumps({
        "1-1-1.html.csv": [["the tallest pylon is a"], [1], "pylons"]}))
    (release / "val_examples.json").write_text(json.dumps({
        "1-1-2.html.csv": [["the tallest pylon is b"], [0], "pylons"]}))
    (release / "test_examples.json").write_text(json.dumps({
        "1-1-3.html.csv": [["the tallest pylon is a"], [1], "pylons"]}))
    result = _make_statements(f"--input_dir={release}", f"--output_dir={statements}", "--pairs_per_table=2",
                              cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((statements / "statements_report.json").read_text())
    assert report["excluded_by_reason"] == {} and report["manifest"]["tables"] == 1
    assert read_manifest(str(statements / "training_tables.txt.gz")) == ["tabfact:1-1-1.html.csv"]

    for split in ("val", "test"):
        result = _make_statements(f"--input_dir={release}", f"--output_dir={tmp_path / split}",
                                  f"--split={split}", cwd=tmp_path)
        assert result.returncode != 0
        assert "1 of 1 tables of --split=" + split in result.stderr
        assert '"tabfact_outside_train": 1' in result.stderr
        assert "every table of --split=" + split + " is outside TabFact train" in result.stderr
        assert not (tmp_path / split / "train_examples.json").exists()


def test_make_statements_on_a_release_of_own_tables_keeps_them(tmp_path):
    release, statements = tmp_path / "mine", tmp_path / "statements"
    (release / "all_csv").mkdir(parents=True)
    (release / "all_csv" / "pylons.csv").write_text("pylon#height\na#310\nb#295\n")
    (release / "dev_examples.json").write_text(json.dumps({"pylons.csv": [["a is taller than b"], [1], "p"]}))
    result = _make_statements(f"--input_dir={release}", f"--output_dir={statements}", "--split=dev",
                              "--pairs_per_table=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    from tapas_tf.data.table_manifest import read_manifest
    assert read_manifest(str(statements / "training_tables.txt.gz")) == ["own:pylons.csv"]
