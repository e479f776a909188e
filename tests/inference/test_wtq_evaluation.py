"""WikiTableQuestions end to end: create_data, train, predict_and_evaluate, and the official format."""

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest
import tensorflow as tf

from tapas_tf.inference.decoding import COUNT, NONE, Prediction
from tapas_tf.inference.prediction_files import (
    escape_wtq,
    official_values,
    read_predictions_tsv,
    write_official_tsv,
)
from tests.pipelines.test_create_task_data import _wtq_release
from tests.vocab_fixture import vocab_tokens, write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_official_values_and_escapes():
    assert official_values(3.0) == ["3"] and official_values(2.5) == ["2.5"]
    assert official_values(float("nan")) == [] and official_values(None) == []
    assert official_values(("Paris", "Lyon")) == ["Paris", "Lyon"]
    assert escape_wtq("a|b\\c\nd\te") == "a\\pb\\\\c\\nd e"


def test_official_file_has_one_line_per_question(tmp_path):
    path = tmp_path / "official.tsv"
    def prediction(question_id, coordinates, aggregation, answer):
        return Prediction(question_id, coordinates, aggregation, (), {}, answer=answer)

    write_official_tsv(str(path), [prediction("nt-5_0", ((0, 0),), 0, ("Paris|Île",)),
                                   prediction("nt-6_0", (), 0, None),
                                   prediction("nt-7_0", ((0, 2), (1, 2)), 1, 7.0)])
    assert path.read_text(encoding="utf-8").splitlines() == ["nt-5\tParis\\pÎle", "nt-6", "nt-7\t7"]


def _run_task(*args, cwd):
    return subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), "--task=WTQ", *args],
                          capture_output=True, text=True, timeout=400, cwd=str(cwd))


def test_wtq_create_data_train_and_predict_and_evaluate(tmp_path):
    data, out, model = _wtq_release(tmp_path), tmp_path / "out", tmp_path / "model"
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    common = (f"--vocab_file={vocab}", "--max_seq_length=128")
    created = _run_task("--mode=create_data", f"--input_dir={data}", f"--output_dir={out}", *common,
                        "--direct_num_workers=1", cwd=tmp_path)
    assert created.returncode == 0, created.stderr[-3000:]
    trained = _run_task("--mode=train", f"--output_dir={out}", f"--model_dir={model}", "--model_size=tiny",
                        f"--model_option=vocab_size={len(vocab_tokens())}", "--train_steps=4",
                        "--train_batch_size=3", "--noprogress_bar", *common, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    config = json.load(open(model / "tapas_config.json"))
    assert (config["num_aggregation_labels"], config["use_answer_as_supervision"]) == (4, True)  # WTQ's preset.
    result = _run_task("--mode=predict_and_evaluate", f"--output_dir={out}", f"--model_dir={model}", *common,
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(model / "predictions" / "dev_metrics.json"))
    assert (metrics["num_questions"], metrics["num_conversion_failures"]) == (2, 0)
    assert metrics["denotation_accuracy"] == metrics["num_correct"] / 2
    official = (model / "predictions" / "dev_official.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in official] == ["nt-5", "nt-6"]
    assert "dev metrics at step 4: denotation_accuracy=" in result.stderr
    assert metrics["decoding"] == {"threshold": 0.5, "fallback_to_best_cell": True, "expected_count": True}  # WTQ's.


def test_wtq_prediction_falls_back_to_the_best_cell_by_default(tmp_path):
    """A model whose every cell is at sigmoid(-3) < 0.5: the plain rule answers nothing; WTQ's
    default answers each question with one cell of the highest probability."""
    runs = _predict_with_and_without(tmp_path, "--nofallback_to_best_cell")
    assert [(p.aggregation, p.coordinates) for p in runs["plain"]] == [(NONE, ())] * 2
    for prediction in runs["default"]:
        (cell,) = prediction.coordinates
        assert prediction.cell_probabilities[cell] == max(prediction.cell_probabilities.values()) < 0.5


def test_wtq_prediction_counts_the_expected_count_by_default(tmp_path):
    """A model that always chooses COUNT and gives each cell of its column 0.45: the plain rule
    counts no cell (0); WTQ's default counts round(3 x 0.45) = 1 cell, the first of the tie."""
    runs = _predict_with_and_without(tmp_path, "--noexpected_count", cell_probability=0.45, operator=COUNT)
    assert [(p.aggregation, p.coordinates, p.answer) for p in runs["plain"]] == [(COUNT, (), 0.0)] * 2
    for prediction in runs["default"]:
        assert (prediction.aggregation, prediction.answer) == (COUNT, 1.0)
        (cell,) = prediction.coordinates
        column_cells = {c: p for c, p in prediction.cell_probabilities.items() if p > 0.01}
        assert sorted(column_cells) == [(0, cell[1]), (1, cell[1]), (2, cell[1])] and cell[0] == 0
        assert all(abs(p - 0.45) < 1e-5 for p in column_cells.values())


def test_table_qa_expected_count_option(tmp_path):
    from tapas_tf.qa.table_qa import TableQA
    from tests.inference.test_sequential import HEADER, ROWS

    model, _ = _unsure_model_dir(tmp_path, cell_probability=0.45, operator=COUNT)
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    table = pd.DataFrame(ROWS, columns=HEADER)
    plain = TableQA.from_model_dir(model, vocab_file=vocab).answer(table, "how many cities?")
    assert (plain.operator, plain.value, plain.cells) == ("COUNT", 0.0, ())
    counted = TableQA.from_model_dir(model, vocab_file=vocab, expected_count=True).answer(table, "how many cities?")
    assert (counted.operator, counted.value, len(counted.cells)) == ("COUNT", 1.0, 1)
    assert counted.cells[0].row == 0 and counted.cells[0].probability == pytest.approx(0.45, abs=1e-5)


def _predict_with_and_without(tmp_path, plain_flag: str, **model_options):
    """WTQ predictions of `_unsure_model_dir(tmp_path, **model_options)`'s two questions, with the
    task's default decoding and with `plain_flag`: {"default": [...], "plain": [...]}."""
    model, interactions = _unsure_model_dir(tmp_path, **model_options)
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    common = (f"--interactions_file={interactions}", f"--model_dir={model}", f"--vocab_file={vocab}",
              "--max_seq_length=48", "--predict_split=dev")
    runs = {}
    for name, flags in (("default", ()), ("plain", (plain_flag,))):
        result = _run_task("--mode=predict", *common, *flags, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = read_predictions_tsv(str(tmp_path / "model" / "predictions" / "dev.tsv"))
    return runs


def _unsure_model_dir(tmp_path, cell_probability: float = 1 / (1 + math.exp(3.0)), operator: int = NONE):
    """A tiny QA model whose cell-selection weights are zero, so every cell of the column it picks
    (the first, as the column logits tie) has `cell_probability` (default sigmoid(-3)), saved as a
    model directory; and two questions to predict. With `operator` other than NONE, an aggregation
    head whose weights are zero and whose bias makes it choose `operator`."""
    from tapas_tf.data.interaction_io import write_interactions
    from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features
    from tests.conversion_fixtures import make_interaction
    from tests.inference.test_sequential import HEADER, ROWS, save_model_dir
    from tests.model_fixtures import tiny_config

    aggregation = {} if operator == NONE else dict(num_aggregation_labels=4)
    config = tiny_config(init_cell_selection_weights_to_zero=True, **aggregation)
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8))
    model.cell_selection_head.output_bias.assign(math.log(cell_probability / (1 - cell_probability)))
    if operator != NONE:
        model.aggregation_head.output_weights.assign(tf.zeros_like(model.aggregation_head.output_weights))
        model.aggregation_head.output_bias.assign(tf.one_hot(operator, 4) * 5.0)
    save_model_dir(tmp_path / "model", model, config)
    interactions = str(tmp_path / "dev.tfrecord")
    write_interactions(interactions, [make_interaction(HEADER, ROWS, [("which city?", [(0, 0)]),
                                                                      ("what population?", [(2, 2)])])])
    return str(tmp_path / "model"), interactions
