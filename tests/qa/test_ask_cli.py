"""`python -m tapas_tf.ask` on the rough edges a new user hits first.

A bad table or an empty question fails in one line before TensorFlow and the model load (checked
with a TensorFlow that cannot be imported); --help shows the model flags and exits 0; a mistyped
flag names the nearest one; --json keeps stdout to JSON lines; the HTML page keeps every answer.
The Console is tested with a stand-in conversation; one run uses the bundled model end to end.
"""

import io
import json
import os
import subprocess
import sys
import types

import pytest

from tapas_tf.checkpoints.bundled import AGGREGATION_DIR, BUNDLED_DIR
from tapas_tf.data.readers.common import make_table
from tapas_tf.qa.ask_results import AskResult, SelectedCell
from tapas_tf.qa.console import Console, read_table_file
from tapas_tf.qa.tables import AskError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "tapas_tf", "data", "example_tables", "aerial_lift_pylons.csv")
ERROR = "ask: error: "


def _ask(*args, stdin=None, env=None, timeout=300):
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run([sys.executable, "-m", "tapas_tf.ask", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=environment)


@pytest.fixture
def no_tensorflow(tmp_path):
    """An environment whose `import tensorflow` fails loudly: what runs there never loaded it."""
    fake = tmp_path / "fake_site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('TENSORFLOW WAS IMPORTED')\n")
    return {"PYTHONPATH": str(tmp_path / "fake_site")}


def assert_one_error_line(result, exit_code, *texts):
    assert result.returncode == exit_code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "TENSORFLOW WAS IMPORTED" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), result.stderr
    for text in texts:
        assert text in lines[0], lines[0]
    assert result.stdout == ""


# --- the table and the question are checked before the model loads ----------------------------


def _bad_tables(tmp_path):
    (tmp_path / "a_directory.csv").mkdir()
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header_only.csv").write_text("city,country\n")
    (tmp_path / "binary.csv").write_bytes(b"\x00\x01\x02PK\x03\x04")
    return {"missing.csv": "no such CSV file", "a_directory.csv": "is a directory",
            "empty.csv": "is empty", "header_only.csv": "has no rows", "binary.csv": "NUL bytes"}


def test_read_table_file_names_the_file_in_every_refusal(tmp_path):
    for name, reason in _bad_tables(tmp_path).items():
        with pytest.raises(AskError) as raised:
            read_table_file(str(tmp_path / name))
        assert str(tmp_path / name) in str(raised.value) and reason in str(raised.value)
    (tmp_path / "good.csv").write_text("city,country\nparis,france\n")
    assert read_table_file(str(tmp_path / "good.csv")).values.tolist() == [["paris", "france"]]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_table_is_named(tmp_path):
    path = tmp_path / "secret.csv"
    path.write_text("a\n1\n")
    path.chmod(0)
    with pytest.raises(AskError, match="secret.csv: cannot be read"):
        read_table_file(str(path))


@pytest.mark.parametrize("name", ["missing.csv", "a_directory.csv", "header_only.csv"])
def test_a_bad_table_fails_in_one_line_before_tensorflow_loads(tmp_path, no_tensorflow, name):
    reason = _bad_tables(tmp_path)[name]
    result = _ask(f"--table={tmp_path / name}", "which city?", env=no_tensorflow, timeout=60)
    assert_one_error_line(result, 1, str(tmp_path / name), reason)


@pytest.mark.parametrize("question", ["", "   ", "\t"])
def test_an_empty_question_is_an_error_not_a_conversation(question, no_tensorflow):
    result = _ask(f"--table={TABLE}", question, stdin="which pylon is the tallest?\n", env=no_tensorflow,
                  timeout=60)
    assert_one_error_line(result, 2, "the question is empty")


def test_a_missing_table_flag_is_a_usage_error(no_tensorflow):
    assert_one_error_line(_ask("which?", env=no_tensorflow, timeout=60), 2, "--table or --index_dir is required")


# --- flags -------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h", "--helpshort", "--helpfull"])
def test_help_exits_0_and_lists_the_flags_that_matter(flag, no_tensorflow):
    result = _ask(flag, env=no_tensorflow, timeout=60)
    assert result.returncode == 0, result.stderr
    for name in ("--table", "--[no]json", "--html", "--[no]prune", "--model_dir", "--threshold", "--vocab_file",
                 "--[no]fallback_to_best_cell", "--[no]expected_count", "--aggregation_model_dir"):
        assert name in result.stdout, (name, result.stdout)
    assert "ask a table, or a collection of tables, a question" in result.stdout
    assert ("--[no]logtostderr" in result.stdout) == (flag == "--helpfull")  # absl's own flags: full help only.


@pytest.mark.parametrize("argument, nearest", [("--tabel=t.csv", "--table"), ("--treshold=0.3", "--threshold"),
                                               ("--modeldir=m", "--model_dir"), ("--jsn", "--json")])
def test_a_misspelt_flag_names_the_nearest_one(argument, nearest, no_tensorflow):
    result = _ask(f"--table={TABLE}", argument, "which?", env=no_tensorflow, timeout=60)
    assert_one_error_line(result, 2, f"unknown flag {argument}; did you mean {nearest}?")


def test_a_bad_value_is_one_line(no_tensorflow):
    result = _ask(f"--table={TABLE}", "--precision=bfloat61", "which?", env=no_tensorflow, timeout=60)
    assert_one_error_line(result, 2, "--precision=bfloat61", "did you mean --precision=bfloat16?")


# --- the Console: stdout holds answers only; the page keeps every answer -----------------------

CITIES = make_table("t", ["city", "country"], [["paris", "france"], ["berlin", "germany"]])


class StandInChat:
    """A table_qa.Conversation without a model: answers the first row; "fail" raises AskError."""

    def __init__(self):
        self.table = types.SimpleNamespace(table=CITIES)
        self.history = []

    def ask(self, question):
        if "fail" in question:
            raise AskError("the question is too long")
        result = AskResult(question, (SelectedCell(0, 0, "city", "paris", 0.9, None),), "NONE", {}, None, (),
                           {(0, 0): 0.9}, (0, 1), (0, 1), (), 32, "stand-in")
        self.history.append(result)
        return result

    def reset(self):
        self.history.clear()


def test_json_conversation_keeps_prompts_and_notes_off_stdout_and_the_page_keeps_every_answer(tmp_path):
    out, messages, page = io.StringIO(), io.StringIO(), tmp_path / "chat.html"
    console = Console(as_json=True, html_path=str(page), out=out, messages=messages)
    lines = io.StringIO("first question\nfail please\n\n:new\nsecond question\n:quit\nnever asked\n")
    assert console.converse(StandInChat(), lines, prompt=True) == 2
    answers = [json.loads(line) for line in out.getvalue().splitlines()]  # Every line is JSON.
    assert [a["question"] for a in answers] == ["first question", "second question"]
    assert messages.getvalue().count("question> ") == 6  # One prompt per line read, up to :quit.
    assert "(new conversation)" in messages.getvalue()
    assert "ask: error: the question is too long" in messages.getvalue()
    html = page.read_text(encoding="utf-8")
    assert html.count('class="question"') == 2 and "first question" in html and "second question" in html


def test_one_question_prints_its_answer_and_writes_the_page(tmp_path):
    out, messages, page = io.StringIO(), io.StringIO(), tmp_path / "one.html"
    console = Console(as_json=False, html_path=str(page), out=out, messages=messages)
    assert console.run(StandInChat(), "which city?", io.StringIO("not read\n")) == 1
    assert "*paris*" in out.getvalue() and messages.getvalue() == ""
    assert page.read_text(encoding="utf-8").count('class="question"') == 1


def test_bundled_model_json_conversation_on_stdin(tmp_path):
    """The real thing: every stdout line is JSON; messages and errors go to stderr; the page keeps
    the answers from before `:new`."""
    page = tmp_path / "chat.html"
    stdin = ("which pylon is the tallest?\n" + "tall " * 600 + "\n:new\nwhich country is torre jaume i in?\n")
    result = _ask(f"--table={TABLE}", "--json", f"--html={page}", stdin=stdin)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["question"] for a in answers] == ["which pylon is the tallest?", "which country is torre jaume i in?"]
    assert "(new conversation)" in result.stderr and ERROR in result.stderr  # The 600-word question.
    html = page.read_text(encoding="utf-8")
    assert html.count('class="question"') == 2 and "which pylon is the tallest?" in html


def test_a_pair_of_models_names_the_one_that_answered(tmp_path):
    """--aggregation_model_dir: "how many" goes to the second model, a lookup stays with the first;
    each JSON answer names its model and backend."""
    from tests.inference.test_sequential import write_random_model_dir

    cells = write_random_model_dir(tmp_path / "cells")
    counts = write_random_model_dir(tmp_path / "counts", num_aggregation_labels=4, use_answer_as_supervision=True,
                                    cell_selection_preference=0.2, answer_loss_cutoff=0.6, huber_loss_delta=0.12)
    stdin = "how many pylons are there?\n:new\nwhich pylon is the tallest?\n"
    result = _ask(f"--table={TABLE}", "--json", f"--model_dir={cells}", f"--aggregation_model_dir={counts}",
                  stdin=stdin)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["model"] for a in answers] == ["counts (TensorFlow)", "cells (TensorFlow)"]
    assert set(answers[0]["operator_probabilities"]) == {"NONE", "SUM", "AVERAGE", "COUNT"}
    missing = _ask(f"--table={TABLE}", f"--model_dir={cells}", f"--aggregation_model_dir={tmp_path}/none_here",
                   "how many?")
    assert missing.returncode == 1 and f"{tmp_path}/none_here is not a tapas-tf model directory" in missing.stderr


def test_the_bundled_pair_answers_in_a_fresh_process_and_names_each_model():
    """No --model_dir: both calibrated bundled models answer a first question and the surer answer
    is kept (the counting question: the aggregation model, which executes its operator; the
    README's lookup selects the right height, with another Barcelona tower's by one of the tiny
    models, as the README shows); a follow-up stays with the conversation model; every
    answer carries a calibrated confidence, and the README's superlative is answered right or
    flagged not sure (the tiny models get it wrong, as the README says); =none turns the pair off, and the
    counting question then gets cells and the note that the model cannot count."""
    stdin = ("how many pylons are there?\n:new\nwhat is the height of torre jaume i?\n"
             "when was it built?\n:new\nwhich pylon is the tallest?\n")
    result = _ask(f"--table={TABLE}", "--json", stdin=stdin)
    assert result.returncode == 0, result.stderr[-3000:]
    count, lookup, follow_up, superlative = [json.loads(line) for line in result.stdout.splitlines()]
    assert count["model"] == f"bundled {os.path.basename(AGGREGATION_DIR)} (LiteRT)"
    assert count["operator"] in ("COUNT", "SUM", "AVERAGE") and isinstance(count["value"], (int, float))
    assert follow_up["model"] == f"bundled {os.path.basename(BUNDLED_DIR)} (LiteRT)"
    pair = {f"bundled {os.path.basename(d)} (LiteRT)" for d in (BUNDLED_DIR, AGGREGATION_DIR)}
    assert lookup["model"] in pair and "107 m" in [cell["text"] for cell in lookup["cells"]]  # The README's question.
    assert not lookup["follow_up"] and follow_up["follow_up"]
    assert all(answer["calibrated"] and 0 < answer["confidence"] < 1 for answer in (count, lookup, follow_up))
    right = [cell["text"] for cell in superlative["cells"]] == ["Glacial Aerial Tramway Kaprun III"]
    assert right or (superlative["sure"] is False
                     and superlative["notes"][-1].startswith("Not sure: this answer's confidence"))
    alone = _ask(f"--table={TABLE}", "--json", "--aggregation_model_dir=none", "how many pylons are there?")
    assert alone.returncode == 0, alone.stderr[-3000:]
    answer = json.loads(alone.stdout)
    assert answer["model"] == f"bundled {os.path.basename(BUNDLED_DIR)} (LiteRT)" and answer["value"] is None
    assert any("can only select cells" in note for note in answer["notes"])


def test_a_reader_that_stops_early_is_no_error(tmp_path):
    """`ask ... | head -1`: the closed pipe ends the conversation quietly, without a traceback."""
    stdin = "".join(f"which pylon is number {i}?\n" for i in range(40))
    reader = subprocess.Popen([sys.executable, "-m", "tapas_tf.ask", f"--table={TABLE}", "--json"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader.stdin.write(stdin)
    reader.stdin.close()
    first = reader.stdout.readline()
    reader.stdout.close()  # As `head -1` does after its line.
    stderr = reader.stderr.read()
    assert reader.wait(timeout=300) == 0, stderr[-3000:]
    assert json.loads(first)["question"] == "which pylon is number 0?"
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_a_semicolon_separated_table_is_read_as_columns(tmp_path):
    table = tmp_path / "pylons.csv"
    table.write_text("pylon;height\nfirst;100 m\nsecond;50 m\n")
    result = _ask(f"--table={table}", "--json", "what is the height of the first pylon?")
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.splitlines()[0])
    assert answer["cells"] and {cell["column_name"] for cell in answer["cells"]} <= {"pylon", "height"}


def test_stderr_is_quiet_by_default_and_v_shows_the_log_lines(tmp_path):
    """What a pruned table costs is in the answer's notes; the log lines that say it too appear only
    with -v. The Python API prints nothing of its own either (no WARNING:root:, no LiteRT line)."""
    big = tmp_path / "big.csv"
    big.write_text("city,population,note\n" + "".join(f"c{i},{13 * i},some longer text here\n"
                                                      for i in range(700)))
    quiet = _ask(f"--table={big}", "--nowindows", "which city has population 130?")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stderr == "" and "The table was pruned to the " in quiet.stdout
    loud = _ask(f"--table={big}", "--nowindows", "-v", "0", "which city has population 130?")
    assert "Pruned the table to " in loud.stderr and "Limit applied (cells_trimmed=" in loud.stderr
    api = subprocess.run([sys.executable, "-c", "from tapas_tf import TableQA; "
                          f"print(TableQA.from_model_dir().answer({str(big)!r}, 'which city?').summary)"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"})
    assert api.returncode == 0 and api.stdout.strip() and api.stderr == "", api.stderr[-3000:]


def test_a_10000_row_csv_is_read_whole_by_ask_in_a_fresh_process(tmp_path):
    """Every row read, in windows, with the bundled pair: the JSON says how, and a count covers all rows."""
    big = tmp_path / "orders.csv"
    big.write_text("order,status,amount\n" + "".join(
        f"o{i},{'shipped' if i % 4 == 0 else 'pending'},{i % 97}\n" for i in range(10_000)))
    result = _ask(f"--table={big}", "--json", "how many orders were shipped?")
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.splitlines()[0])
    reading = answer["reading"]
    assert reading["rows_read"] == reading["total_rows"] == 10_000 and reading["windows"] > 1
    assert reading["limit"] is None and reading["columns"] == ["order", "status", "amount"]
    assert any(d.startswith("Read all 10,000 rows in ") for d in answer["diagnostics"])
    assert all(0 <= cell["row"] < 10_000 for cell in answer["cells"])


def test_ask_reads_a_sqlite_table_to_max_rows_and_says_so(tmp_path):
    import sqlite3

    database = tmp_path / "shop.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE orders (item TEXT, price TEXT)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", ((f"item{i}", str(i % 50)) for i in range(5_000)))
    result = _ask(f"--table={database}", "--table_name=orders", "--max_rows=400", "--json",
                  "what is the price of item7?")
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.splitlines()[0])
    assert answer["reading"]["rows_read"] == 400
    assert any(d.startswith("Only the first 400 of its 5,000 rows were read") for d in answer["diagnostics"])
    refused = _ask(f"--table={database}", "--table_name=nope", "what?")
    assert refused.returncode == 1 and "has no table 'nope'" in refused.stderr
