"""The ask API and CLI: executed answers, conversations, big tables, bad input, and a trained model.

The trained model is the one of test_sequential (a tiny model fitted to questions about a
city/country/population table); the other tests use a tiny random model with an aggregation head.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.qa.ask_encoding import BUCKETS  # noqa: E402
from tapas_tf.qa.ask_results import decode_answer, format_number  # noqa: E402
from tapas_tf.qa.rendering import render_html, render_text  # noqa: E402
from tapas_tf.qa.table_qa import AskError, TableQA  # noqa: E402
from tests.inference.test_sequential import HEADER, ROWS, write_random_model_dir  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WTQ_OPTIONS = dict(num_aggregation_labels=4, use_answer_as_supervision=True, cell_selection_preference=0.2,
                   answer_loss_cutoff=0.6, huber_loss_delta=0.12, max_position_embeddings=512)


@pytest.fixture(scope="module")
def random_model_dir(tmp_path_factory):
    """A tiny untrained model with an aggregation head, its vocabulary inside the directory."""
    return write_random_model_dir(tmp_path_factory.mktemp("random") / "model", **WTQ_OPTIONS)


@pytest.fixture(scope="module")
def qa(random_model_dir):
    return TableQA.from_model_dir(random_model_dir)


# --- executed values on a hand-checked table -------------------------------------------------

AMOUNTS = pd.DataFrame({"item": ["a", "b", "c", "d"], "amount": ["1,000", "2.5", "n/a", "7"],
                        "day": ["1998-11-10", "2001-02-03", "1999-05-06", "2000-01-01"]})


def _select(qa, cells, operator):
    """decode_answer with the model's outputs replaced: probability 1 on `cells`, logits for `operator`."""
    encoded = qa.encoder.encode(qa.encoder.prepare(AMOUNTS), "what is the total amount?")
    features = encoded.features
    probabilities = np.zeros(len(features["input_ids"]), np.float32)
    for row, column in cells:
        probabilities[(features["row_ids"] == row + 1) & (features["column_ids"] == column + 1)] = 1.0
    logits = np.full(4, -5.0, np.float32)
    logits[["NONE", "SUM", "AVERAGE", "COUNT"].index(operator)] = 5.0
    return decode_answer(encoded, probabilities, logits)


def test_sum_average_count_execute_on_the_numbers_of_the_cells(qa):
    amounts = [(0, 1), (1, 1), (2, 1)]  # "1,000", "2.5" and "n/a" (no number).
    total = _select(qa, amounts, "SUM")
    assert total.value == 1002.5 and total.numbers == (1000.0, 2.5)
    assert total.summary == "SUM of 3 cells = 1,002.5"
    assert [c.text for c in total.cells] == ["1,000", "2.5", "n/a"]
    assert [c.number for c in total.cells] == [1000.0, 2.5, None]
    assert _select(qa, amounts, "AVERAGE").value == 501.25  # Cells without a number are not counted.
    count = _select(qa, amounts, "COUNT")
    assert count.value == 3.0 and count.numbers == () and count.summary == "COUNT of 3 cells = 3"
    none = _select(qa, [(3, 0), (0, 0)], "NONE")
    assert none.value is None and none.answers == ("a", "d") and none.summary == "a, d"


def test_dates_are_counted_but_not_summed(qa):
    days = [(0, 2), (1, 2), (2, 2)]
    assert _select(qa, days, "COUNT").value == 3.0
    total = _select(qa, days, "SUM")
    assert total.value == 0.0 and total.numbers == ()
    assert total.summary == "SUM of 3 cells = 0 (no selected cell holds a number)"
    assert math.isnan(_select(qa, days, "AVERAGE").value)


def test_format_number():
    assert [format_number(v) for v in (4812.0, 12.5, 1 / 3, -2.0, float("nan"))] == [
        "4,812", "12.5", "0.333333", "-2", "no number"]


# --- the model path ----------------------------------------------------------------------------


def test_the_sequence_is_the_smallest_bucket_that_holds_the_question(qa):
    result = qa.answer(AMOUNTS, "what is the total amount?")
    encoded = qa.encoder.encode(qa.encoder.prepare(AMOUNTS), "what is the total amount?")
    assert encoded.real_length <= result.sequence_length == min(b for b in BUCKETS if b >= encoded.real_length)
    assert result.operator in ("NONE", "SUM", "AVERAGE", "COUNT")
    assert set(result.operator_probabilities) == {"NONE", "SUM", "AVERAGE", "COUNT"}
    assert len(result.cell_probabilities) == 12


def test_raised_row_and_column_segments_change_nothing_within_the_trained_limits(qa, random_model_dir):
    """TableQA builds the heads with 256 row and column segments; the model trained with 8 and 8."""
    encoded = qa.encoder.encode(qa.encoder.prepare(AMOUNTS), "which item?")
    batch = {name: tf.constant(values[None]) for name, values in encoded.features.items()}
    original = model_dir_lib.load_model(random_model_dir)
    assert original.tapas_config.max_num_rows == 8 and qa.model.tapas_config.max_num_rows == 256
    ours, theirs = qa.model(batch, training=False), original(batch, training=False)
    np.testing.assert_allclose(ours["probabilities"], theirs["probabilities"], atol=1e-6)
    np.testing.assert_allclose(ours["aggregation_logits"], theirs["aggregation_logits"], atol=1e-6)


def test_answer_many_converts_once_and_equals_single_answers(qa):
    questions = ["what is the total amount?", "which item?", "how many days?"]
    together = qa.answer_many(AMOUNTS, questions)
    assert [r.question for r in together] == questions
    for result, question in zip(together, questions):
        single = qa.answer(AMOUNTS, question)
        assert result.coordinates == single.coordinates and result.operator == single.operator
        assert result.cell_probabilities == pytest.approx(single.cell_probabilities, abs=1e-6)


def test_previous_answer_feeds_prev_label_ids(qa):
    prepared = qa.encoder.prepare(AMOUNTS)
    encoded = qa.encoder.encode(prepared, "and of those?", previous_answer=[(1, 0), (3, 2)])
    features = encoded.features
    marked = {(int(r) - 1, int(c) - 1) for r, c, p in zip(features["row_ids"], features["column_ids"],
                                                          features["prev_label_ids"]) if p}
    assert marked == {(1, 0), (3, 2)}
    with pytest.raises(AskError, match="previous_answer"):
        qa.answer(AMOUNTS, "x?", previous_answer="cells")


# --- big tables --------------------------------------------------------------------------------


def _big_frame(rows):
    return pd.DataFrame({"city": [f"town{i}" for i in range(rows)], "code": [str(i) for i in range(rows)]})


def test_a_table_beyond_the_row_embeddings_is_read_in_windows(qa):
    frame = _big_frame(300)
    frame.loc[250, "city"] = "paris"
    result = qa.answer(frame, "what is the code of paris?")
    assert result.reading.rows_read == 300 and result.reading.windows > 1
    assert result.kept_rows == tuple(range(300))
    assert any(note.startswith("Read all 300 rows in ") for note in result.diagnostics)


def test_a_table_beyond_the_row_embeddings_is_pruned_visibly_without_windows(qa, monkeypatch):
    monkeypatch.setattr(qa, "windows", False)
    frame = _big_frame(300)
    frame.loc[250, "city"] = "paris"
    result = qa.answer(frame, "what is the code of paris?")
    assert 250 in result.kept_rows and len(result.kept_rows) <= 255
    assert any("pruned to the" in note and "of 300 rows" in note for note in result.diagnostics)
    assert all(row in result.kept_rows for row, _ in result.coordinates)  # The user's row numbers.
    assert result.sequence_length <= 512


def test_a_table_beyond_the_trained_rows_says_so(qa):
    result = qa.answer(_big_frame(20), "which town?")
    assert len(result.kept_rows) == 20
    assert any("trained for at most 7" in note for note in result.diagnostics)


def test_without_pruning_a_big_table_is_refused(random_model_dir):
    strict = TableQA.from_model_dir(random_model_dir, prune=False, windows=False)
    with pytest.raises(AskError, match=r"300 rows .*\(prune=True"):
        strict.answer(_big_frame(300), "which town?")
    with pytest.raises(AskError, match="does not fit the model.*prune=True"):
        strict.answer(_big_frame(200), "which town?")


def test_a_100000_row_csv_is_answered_with_pruning(qa, tmp_path, monkeypatch):
    monkeypatch.setattr(qa, "windows", False)
    path = tmp_path / "big.csv"
    _big_frame(100_000).to_csv(path, index=False)
    result = qa.answer(str(path), "what is the code of town99999?")
    assert 99_999 in result.kept_rows
    assert any("of 100000 rows" in note for note in result.diagnostics)


def test_a_100000_row_csv_read_up_to_max_rows_says_so(qa, tmp_path, monkeypatch):
    monkeypatch.setattr(qa, "max_rows", 2_000)
    path = tmp_path / "big.csv"
    _big_frame(100_000).to_csv(path, index=False)
    result = qa.answer(str(path), "how many towns are there?")
    assert result.reading.rows_read == 2_000 and result.reading.total_rows == 100_000
    assert result.reading.limit == "max_rows"
    assert any("Only the first 2,000 of the table's 100,000 rows were read" in n for n in result.diagnostics)
    assert all(row < 2_000 for row, _ in result.coordinates)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("table, question, message", [
    (pd.DataFrame(), "which?", "no columns"),
    (pd.DataFrame(columns=["a"]), "which?", "no rows"),
    (AMOUNTS, "   ", "question is empty"),
    (AMOUNTS, "word " * 1000, "question is too long"),
    ("/nonexistent/table.csv", "which?", "no such CSV file"),
])
def test_bad_input_is_a_clear_error(qa, table, question, message):
    with pytest.raises(AskError, match=message):
        qa.answer(table, question)


def test_odd_but_valid_tables_and_questions_are_answered_with_notes(qa):
    frame = pd.DataFrame([[1, 2.5, pd.Timestamp("2020-01-05"), None]], columns=["x", "x", "", 3])
    result = qa.answer(frame, "東京の人口は？")
    assert any("share the names ['x']" in note for note in result.diagnostics)
    assert any("no name" in note for note in result.diagnostics)
    assert any("unknown to the vocabulary" in note for note in result.diagnostics)
    assert len(result.cell_probabilities) == 4


# --- a trained model, through the API and the CLI ------------------------------------------------


@pytest.fixture(scope="module")
def trained_qa(trained, tmp_path_factory):
    table = tmp_path_factory.mktemp("table") / "cities.csv"
    pd.DataFrame(ROWS, columns=HEADER).to_csv(table, index=False)
    return TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"]), str(table)


def test_trained_model_answers_and_follows_up(trained_qa):
    qa, table = trained_qa
    assert qa.answer(table, "which city?").answers == ("paris", "berlin", "london")
    chat = qa.conversation(table)
    assert chat.ask("what population?").coordinates == ((0, 2),)
    assert chat.ask("which city?").answers == ("berlin",)  # It sees the previous answer.
    chat.reset()
    assert chat.ask("which city?").answers == ("paris", "berlin", "london")


def test_renderings_mark_the_selected_cells(trained_qa):
    qa, table = trained_qa
    result = qa.answer(table, "which city?")
    proto = qa.encoder.prepare(table).table
    text = render_text(proto, result)
    assert "A: paris, berlin, london" in text and "*berlin*" in text and "*germany*" not in text
    page = render_html(proto, [result])
    assert page.count('class="selected"') == 3
    assert '<td class="selected" title="p = ' in page and ">berlin</td>" in page


def test_long_tables_say_how_many_rows_follow_below_the_table_and_cells_read_as_words(trained_qa):
    qa, _ = trained_qa
    long = pd.DataFrame({"city": ["paris", "berlin", "london"] * 200, "country": ["x"] * 600,
                         "population": ["1"] * 600})
    result = qa.answer(long.head(3), "which city?")
    text = render_text(qa.encoder.prepare(long).table, result, max_rows=5)
    lines = text.splitlines()
    assert lines[-1] == "… 595 more rows"
    header = next(line for line in lines if line.startswith("#"))
    assert header.startswith("# | city")  # The "#" column is as wide as the row numbers, no wider.
    from tapas_tf.qa.ask_results import _cells_in_words

    assert _cells_in_words(["Galway", "Galway", "Cork"]) == "Galway (2 cells), Cork"
    assert _cells_in_words(["", "Cork"]) == "(empty cell), Cork"  # A NaN cell of a DataFrame.
    many = [f"c{i}" for i in range(23)] + ["c0", "c1"]  # A big table's answer: 25 cells, 23 texts.
    assert _cells_in_words(many, most=20) == ", ".join(["c0 (2 cells)", "c1 (2 cells)"] + [f"c{i}" for i in range(2, 20)]
                                                       ) + ", and 3 other texts (25 cells in all)"
    assert _cells_in_words(many[:21], most=20).endswith("c19, and 1 other text (21 cells in all)")
    assert _cells_in_words(many[:20], most=20).endswith("c18, c19")


def test_fallback_to_best_cell_answers_when_no_cell_passes_the_threshold(trained, trained_qa):
    _, table = trained_qa
    # No probability is above 1.0: the plain rule answers nothing.
    strict = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"], threshold=1.0,
                                    fallback_to_best_cell=False)
    assert strict.answer(table, "which city?").coordinates == ()
    fallback = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"], threshold=1.0,
                                      fallback_to_best_cell=True)
    result = fallback.answer(table, "which city?")
    best = max(result.cell_probabilities, key=result.cell_probabilities.get)
    assert result.coordinates == (best,) and best[1] == 0  # One city: the one the model is surest of.
    assert result.answers == (ROWS[best[0]][0],)


def _ask_cli(*args, stdin=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "tapas_tf.ask", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)


def test_cli_answers_a_question_and_writes_the_page(trained, trained_qa, tmp_path):
    _, table = trained_qa
    page = tmp_path / "answer.html"
    result = _ask_cli(f"--model_dir={trained['model_dir']}", f"--table={table}", f"--vocab_file={trained['vocab']}",
                      f"--html={page}", "which", "city?")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "A: paris, berlin, london" in result.stdout and "*paris*" in result.stdout
    html = page.read_text(encoding="utf-8")
    assert html.count('class="selected"') == 3 and "A: paris, berlin, london" in html


def test_cli_conversation_on_stdin(trained, trained_qa, tmp_path):
    _, table = trained_qa
    page = tmp_path / "chat.html"
    result = _ask_cli(f"--model_dir={trained['model_dir']}", f"--table={table}", f"--vocab_file={trained['vocab']}",
                      "--json", f"--html={page}", stdin="what population?\nwhich city?\n:new\nwhich city?\n")
    assert result.returncode == 0, result.stderr[-2000:]
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [a["answer"] for a in answers] == ["2", "berlin", "paris, berlin, london"]
    assert answers[1]["cells"][0]["row"] == 1 and answers[1]["cells"][0]["column_name"] == "city"
    html = page.read_text(encoding="utf-8")
    assert html.count('class="question"') == 3  # The page keeps every answer, from before :new too.


def test_cli_fallback_to_best_cell(trained, trained_qa):
    """The flag reaches the decoding rule (one command line); what each setting answers is checked
    through the API, in this process (each command line costs a TensorFlow start-up)."""
    _, table = trained_qa
    fallback = _ask_cli(f"--model_dir={trained['model_dir']}", f"--table={table}", f"--vocab_file={trained['vocab']}",
                        "--json", "--threshold=1.0", "--fallback_to_best_cell", "which city?")
    assert fallback.returncode == 0, fallback.stderr[-2000:]
    cells = json.loads(fallback.stdout.splitlines()[0])["cells"]
    assert len(cells) == 1 and cells[0]["column_name"] == "city"

    def asked(**options):
        qa = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"], threshold=1.0, **options)
        return [dataclasses.asdict(cell) for cell in qa.answer(table, "which city?").cells]

    assert asked(fallback_to_best_cell=False) == []
    # The model selects one column (SQA's preset): by default it answers its best cell, not nothing.
    default = asked()
    assert [(c["row"], c["column"], c["text"]) for c in default] == [(c["row"], c["column"], c["text"]) for c in cells]


def test_cli_without_model_dir_answers_with_the_bundled_model():
    """The README's command: the bundled model (its own vocabulary) on a real WTQ table."""
    table = os.path.join(ROOT, "tapas_tf", "data", "example_tables", "aerial_lift_pylons.csv")
    result = _ask_cli(f"--table={table}", "--json", "what is the height of torre jaume i?")
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.splitlines()[0])
    assert ("Height", "107 m") in [(cell["column_name"], cell["text"]) for cell in answer["cells"]]
    assert "107 m" in answer["answer"] and answer["calibrated"] and 0 < answer["confidence"] < 1


def test_cli_errors_are_one_line(trained, tmp_path):
    result = _ask_cli(f"--model_dir={trained['model_dir']}", f"--table={tmp_path / 'missing.csv'}", "which?")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("ask: error: ") and "missing.csv" in result.stderr
    assert "Traceback" not in result.stderr


# --- bfloat16 ----------------------------------------------------------------------------------


def _cpu_has_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and ("avx512_bf16" in line or "amx_bf16" in line) for line in f)
    except OSError:
        return False


def test_bfloat16_precision_stays_close_and_leaves_other_functions_alone(random_model_dir):
    full = TableQA.from_model_dir(random_model_dir)
    half = TableQA.from_model_dir(random_model_dir, precision="bfloat16")
    encoded = full.encoder.encode(full.encoder.prepare(AMOUNTS), "what is the total amount?")
    length = len(encoded.features["input_ids"])
    ours, theirs = (qa._call(length, [encoded.features]) for qa in (full, half))  # pylint: disable=protected-access
    np.testing.assert_allclose(theirs["probabilities"], ours["probabilities"], atol=5e-2)
    if _cpu_has_bf16():  # Elsewhere TensorFlow keeps the graph in float32.
        assert np.abs(theirs["probabilities"] - ours["probabilities"]).max() > 0
    # The rewrite is on only during the bfloat16 model's calls.
    assert not tf.config.optimizer.get_experimental_options().get("auto_mixed_precision_onednn_bfloat16", False)
    again = full._call(length, [encoded.features])  # pylint: disable=protected-access
    np.testing.assert_array_equal(again["probabilities"], ours["probabilities"])
    assert half.answer(AMOUNTS, "what is the total amount?").operator in ("NONE", "SUM", "AVERAGE", "COUNT")
    with pytest.raises(ValueError, match="precision must be one of"):
        TableQA.from_model_dir(random_model_dir, precision="float16")
