"""The web page's server (tapas_tf/serving/web_app.py): every endpoint in-process, no browser.

The model is the trained one of test_sequential, so answers are known: "which city?" selects the
three cities; after "what population?" (paris's 2) the follow-up "which city?" selects berlin.
Collection mode asks an index over three tables that share no word (cities, rivers, mountains),
so a question names the table that must answer it.
"""

import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import requests  # noqa: E402

pytest.importorskip("starlette", reason="the web extra: pip install 'tapas-tf[web]'")

from starlette.testclient import TestClient  # noqa: E402

from tapas_tf.qa.ask_results import AskResult, SelectedCell  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.serving import web_app, web_collections, web_sessions  # noqa: E402
from tests.inference.test_sequential import HEADER, ROOT, ROWS  # noqa: E402

CITIES_CSV = pd.DataFrame(ROWS, columns=HEADER).to_csv(index=False).encode("utf-8")
LIMITS = web_sessions.WebLimits(max_upload_bytes=200_000, max_table_rows=1_000, max_sessions=2,
                                max_question_chars=200, max_rows_shown=50)


@pytest.fixture(scope="module")
def qa(trained):
    return TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"])


@pytest.fixture
def client(qa):
    # raise_server_exceptions=False: a 500 must reach the client as the app's JSON, as in production.
    with TestClient(web_app.create_app(qa, LIMITS, "trained-test-model"), raise_server_exceptions=False) as c:
        yield c


def _upload(client, data=CITIES_CSV, name="cities.csv"):
    return client.post("/api/table", params={"name": name}, content=data, headers={"Content-Type": "text/csv"})


def _ask(client, session, question):
    return client.post("/api/ask", json={"session": session, "question": question})


def test_page_and_static_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="question"' in page.text and "/static/app.js" in page.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200


def test_the_favicon_is_served_and_linked(client):
    page = client.get("/").text
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    for path in ("/favicon.ico", "/static/favicon.svg"):  # /favicon.ico: for browsers that ask there anyway.
        icon = client.get(path)
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml"), path
        assert icon.text.lstrip().startswith("<svg") and len(icon.content) < 2_000


def test_info_lists_the_model_and_the_example_tables(client):
    info = client.get("/api/info").json()
    assert info["model"] == "trained-test-model" and info["threshold"] == 0.5 and info["aggregation_model"] is None
    assert "shooting_1988_medals.csv" in info["examples"]
    assert info["limits"]["max_table_rows"] == 1_000


def test_upload_ask_follow_up_and_new_conversation(client):
    table = _upload(client).json()
    assert (table["name"], table["rows"], table["columns"], table["history"]) == ("cities.csv", 3, 3, [])
    assert table["table_html"].count("<td") == 9 and 'class="selected"' not in table["table_html"]
    session = table["session"]

    first = _ask(client, session, "  what population? ").json()
    assert first["question"] == "what population?" and first["answer"] == "2"
    assert [(c["row"], c["column"]) for c in first["cells"]] == [(0, 2)]
    assert first["table_html"].count('class="selected"') == 1
    assert 'class="selected" title="p = ' in first["table_html"] and 'data-row="0" data-column="2"' in first["table_html"]
    assert first["turn"] == 1
    # A lookup in plain words: the cells are the answer, no operator named, who answered.
    assert (first["answer_line"], first["working"], first["answer_notes"]) == ("2", "", [])
    assert first["answered_by"] == "Answered by trained-test-model" and first["model"] == "model"
    assert "NONE" not in str({k: first[k] for k in ("answer_line", "working", "answer_notes", "details")})
    assert first["elapsed_ms"] > 0

    follow_up = _ask(client, session, "which city?").json()  # Sees paris's population as the previous answer.
    assert follow_up["answer"] == "berlin" and follow_up["turn"] == 2
    assert [h["question"] for h in follow_up["history"]] == ["what population?", "which city?"]
    assert [h["answer_line"] for h in follow_up["history"]] == ["2", "berlin"]

    reset = client.post("/api/reset", json={"session": session}).json()
    assert reset["session"] == session and reset["history"] == []
    assert _ask(client, session, "which city?").json()["answer"] == "paris, berlin, london"


def test_an_example_table_loads_by_name(client):
    table = client.post("/api/example", json={"name": "shooting_1988_medals.csv"}).json()
    assert table["name"] == "shooting_1988_medals.csv" and table["rows"] > 5 and table["columns"] >= 5
    bad = client.post("/api/example", json={"name": "../../../etc/passwd"})
    assert bad.status_code == 400 and "no example table is called" in bad.json()["error"]


@pytest.mark.parametrize("data, name, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "picture.png", "picture.png is not a CSV file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "picture.csv", "holds NUL bytes"),
    (b"a,b\n\xff\xfe,x\n", "latin.csv", "is not UTF-8 text"),
    (b"", "empty.csv", "empty.csv is empty"),
    (b"city,country\n", "header_only.csv", "no rows"),
])
def test_bad_uploads_get_a_sentence_and_a_400(client, data, name, message):
    response = _upload(client, data, name)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"] and "Traceback" not in response.text


def test_too_many_rows_and_too_many_bytes_are_refused(client):
    rows = "".join(f"r{i},{i}\n" for i in range(1_001)).encode()
    response = _upload(client, b"name,value\n" + rows, "long.csv")
    assert response.status_code == 400 and "1,001 rows" in response.json()["error"]
    response = _upload(client, b"name,value\n" + b"x,1\n" * 60_000, "huge.csv")
    assert response.status_code == 413 and "larger than 200,000 bytes" in response.json()["error"]


def test_a_100000_row_table_gets_a_sentence_with_the_default_limits(qa):
    data = b"name,value\n" + "".join(f"r{i},{i}\n" for i in range(100_000)).encode()
    assert len(data) < web_sessions.WebLimits().max_upload_bytes  # Refused for its rows, not its size.
    with TestClient(web_app.create_app(qa), raise_server_exceptions=False) as default_client:
        response = _upload(default_client, data, "big.csv")
    assert response.status_code == 400
    assert response.json()["error"].startswith("big.csv has 100,000 rows; this page takes tables of up to 10,000 rows")


def test_bad_questions_and_sessions(client):
    session = _upload(client).json()["session"]
    for question in ("", "   ", None, 7):
        response = _ask(client, session, question)
        assert response.status_code == 400 and "the question is empty" in response.json()["error"]
    response = _ask(client, session, "why " * 100)
    assert response.status_code == 400 and "ask in at most 200" in response.json()["error"]
    response = _ask(client, "no-such-session", "which city?")
    assert response.status_code == 404 and "choose the table again" in response.json()["error"]
    response = client.post("/api/ask", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "not JSON" in response.json()["error"]
    response = client.post("/api/ask", json=["a", "list"])
    assert response.status_code == 400 and "not a JSON object" in response.json()["error"]
    assert _ask(client, session, "which city?").status_code == 200  # Still serving.


def test_unknown_paths_and_methods_answer_in_json(client):
    missing = client.get("/api/nothing")
    assert missing.status_code == 404 and "/api/nothing" in missing.json()["error"]
    wrong = client.get("/api/ask")
    assert wrong.status_code == 405 and "error" in wrong.json()


def test_oldest_session_is_dropped_beyond_the_limit(client):
    first, second, third = (_upload(client).json()["session"] for _ in range(3))  # max_sessions=2.
    assert _ask(client, first, "which city?").status_code == 404
    assert _ask(client, second, "which city?").status_code == 200
    assert _ask(client, third, "which city?").status_code == 200


def test_a_failure_inside_the_model_is_a_500_and_the_server_goes_on(client, qa, monkeypatch):
    session = _upload(client).json()["session"]

    def broken(*args, **kwargs):
        raise RuntimeError("a kernel failed")

    monkeypatch.setattr(qa, "_call", broken)
    response = _ask(client, session, "which city?")
    assert response.status_code == 500 and "failed to answer" in response.json()["error"]
    assert "kernel" not in response.json()["error"]  # The log has the traceback, the page a sentence.
    monkeypatch.undo()
    assert _ask(client, session, "which city?").json()["answer"] == "paris, berlin, london"


def test_a_big_table_says_it_is_read_in_windows(client):
    # 300 rows: more than the 255 of the row embeddings, and far more tokens than the 256 positions.
    rows = [[f"town{i}", f"land{i}", str(i)] for i in range(300)]
    data = pd.DataFrame(rows, columns=HEADER).to_csv(index=False).encode()
    table = _upload(client, data, "towns.csv").json()
    assert any("300 rows" in note and "in windows of rows" in note for note in table["notes"]), table["notes"]
    answer = _ask(client, table["session"], "which city?").json()
    assert answer["reading"]["rows_read"] == 300 and answer["reading"]["windows"] > 1
    assert any(note.startswith("Read all 300 rows in ") for note in answer["details"]), answer["details"]
    assert any("each question reads every row, in windows" in note for note in answer["table_notes"])
    assert 'class="pruned"' not in answer["table_html"]


def test_a_big_table_says_it_will_be_pruned_without_windows(client, qa, monkeypatch):
    monkeypatch.setattr(qa, "windows", False)
    rows = [[f"town{i}", f"land{i}", str(i)] for i in range(300)]
    data = pd.DataFrame(rows, columns=HEADER).to_csv(index=False).encode()
    table = _upload(client, data, "towns.csv").json()
    assert any("300 rows" in note and "at most 255 rows" in note for note in table["notes"]), table["notes"]
    answer = _ask(client, table["session"], "which city?").json()
    assert any(note.startswith("The table was pruned to the ") and "of 300 rows" in note
               for note in answer["diagnostics"]), answer["diagnostics"]
    # The page's words for it stay on the answer: it says which rows the answer could come from.
    [pruned] = [n for n in answer["answer_notes"] if n.startswith("The model read only the ")]
    assert "of the 300 rows most related to this question" in pruned, answer["answer_notes"]
    assert 'class="pruned"' in answer["table_html"]


def sum_of_column(column: int):
    """A stand-in for `TableQA._call`: every cell of `column` (0-based) at probability 1, and SUM.

    It gives the page an answer with an executed aggregation, which the trained test model (no
    aggregation head) cannot.
    """

    def call(length, rows):
        probabilities = np.stack([np.where(row["column_ids"] == column + 1, 1.0, 0.0) for row in rows])
        logits = np.tile(np.array([-5.0, 5.0, -5.0, -5.0], np.float32), (len(rows), 1))
        return {"probabilities": probabilities.astype(np.float32), "aggregation_logits": logits}

    return call


def test_an_aggregation_shows_its_executed_value(client, qa, monkeypatch):
    session = _upload(client).json()["session"]
    monkeypatch.setattr(qa, "_call", sum_of_column(2))
    answer = _ask(client, session, "what is the total population?").json()
    assert answer["summary"] == "SUM of 3 cells = 14" and answer["value_text"] == "14"
    assert (answer["answer_line"], answer["working"]) == ("Sum of 3 cells = 14", "2 + 4 + 8 = 14")
    assert "The model chose to sum the highlighted cells with probability 1.00." in answer["details"]
    assert answer["table_html"].count('class="selected"') == 3


def test_a_pair_answers_aggregation_with_its_second_model_and_says_so(trained, tmp_path):
    """serve with a pair of models: a question that reads like counting goes to the model with an
    aggregation head, the page names that model, and the follow-up is the first model's again."""
    from tests.inference.test_sequential import write_random_model_dir

    counts = write_random_model_dir(tmp_path / "counts", num_aggregation_labels=4, use_answer_as_supervision=True,
                                    cell_selection_preference=0.2, answer_loss_cutoff=0.6, huber_loss_delta=0.12)
    pair = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"], aggregation_model_dir=counts)
    assert pair.aggregation_model_name == "counts" and callable(pair._aggregation_model)  # Not loaded for its name.
    with TestClient(web_app.create_app(pair, LIMITS, "the pair"), raise_server_exceptions=False) as client:
        assert client.get("/api/info").json()["aggregation_model"] == "counts"
        session = _upload(client).json()["session"]
        counted = _ask(client, session, "how many cities are there?").json()
        assert counted["model"] == "counts" and counted["answered_by"] == "Answered by counts"
        assert set(counted["operator_probabilities"]) == {"NONE", "SUM", "AVERAGE", "COUNT"}
        follow_up = _ask(client, session, "which city?").json()
        assert follow_up["model"] == "model" and follow_up["answered_by"] == "Answered by the pair"
        assert [h["question"] for h in follow_up["history"]] == ["how many cities are there?", "which city?"]


def _result(operator, texts_and_numbers, value, probabilities=None):
    cells = tuple(SelectedCell(row, 1, "amount", text, 0.9, number)
                  for row, (text, number) in enumerate(texts_and_numbers))
    numbers = tuple(number for _, number in texts_and_numbers if number is not None)
    return AskResult("q", cells, operator, probabilities or {}, value, numbers, {}, (), (), (), 64)


def test_answer_line_and_working_say_an_aggregation_in_words():
    total = _result("SUM", [("1,000", 1000.0), ("3,812", 3812.0), ("n/a", None)], 4812.0,
                    {"NONE": 0.1, "SUM": 0.7, "AVERAGE": 0.1, "COUNT": 0.1})
    assert total.summary == "SUM of 3 cells = 4,812"  # The ask API's words; the page says it in its own.
    assert web_sessions.answer_line(total) == "Sum of 3 cells = 4,812"
    assert web_sessions.working_line(total) == ("1,000 + 3,812 = 4,812; 1 highlighted cell holds no number "
                                                "and is left out")
    mean = _result("AVERAGE", [("2", 2.0), ("4", 4.0), ("9", 9.0)], 5.0)
    assert (web_sessions.answer_line(mean), web_sessions.working_line(mean)) == (
        "Average of 3 cells = 5", "(2 + 4 + 9) / 3 = 5")
    count = _result("COUNT", [("a", None), ("b", None), ("c", None)], 3.0)
    assert (web_sessions.answer_line(count), web_sessions.working_line(count)) == (
        "Count: 3", "3 highlighted cells counted")
    many = _result("SUM", [(str(i), float(i)) for i in range(1, 21)], 210.0)
    first_eleven = " + ".join(str(i) for i in range(1, 12))
    assert web_sessions.working_line(many) == f"{first_eleven} + … (20 numbers) = 210"
    no_number = _result("SUM", [("n/a", None)], 0.0)
    assert web_sessions.answer_line(no_number) == "Sum of 1 cell: none of them holds a number"
    assert web_sessions.working_line(no_number) == ""
    lookup = _result("NONE", [("paris", None)], None, {"NONE": 0.93, "SUM": 0.07})
    assert (web_sessions.answer_line(lookup), web_sessions.working_line(lookup)) == ("paris", "")
    assert web_sessions.answer_line(_result("NONE", [], None)) == "No answer: the model selected no cell"


def test_every_diagnostic_of_the_ask_api_is_sorted_for_the_page(qa):
    """The sentences come from the ask API itself (`TableEncoder._diagnostics` and the table's), so a
    changed sentence fails here, not on the page. The answer's own notes (`AskResult.notes`) are
    not diagnostics: `answer_view` puts them first."""
    from tapas_tf.features.classifier_examples import STAT_CELLS_TRIMMED, STAT_RANKS_CLAMPED
    from tapas_tf.qa import pruning

    encoder = qa.encoder
    frame = pd.DataFrame([[f"town{i}", "", str(i)] for i in range(300)], columns=["name", "", "name"])
    table = encoder.prepare(frame).table
    pruned = pruning.subset(table, list(range(encoder.trained_rows + 2)), [0, 2])
    question = table_qa_question("ⵣⵣⵣ ⴰⴱⴳ ⴷⴹ which?")
    stats = {STAT_CELLS_TRIMMED: 7, STAT_RANKS_CLAMPED: 3}
    routine = encoder._diagnostics(pruned, stats, question)  # noqa: SLF001 (every sentence it can say)
    table_notes = encoder.prepare(frame).diagnostics
    assert len(routine) == 5 and len(table_notes) == 2, (routine, table_notes)

    notes = web_sessions.sort_diagnostics(table_notes + routine, table_notes)
    assert notes.details == [s for s in routine if "word pieces to fit" in s or "share rank" in s
                             or "heads were trained" in s]
    assert notes.table_notes == [
        "Some long cells are shortened to fit the model: it reads only their beginning.",
        "Some columns hold more different values than the model can put in order, so comparisons there "
        "(largest, earliest) are approximate.",
        "The model reads more rows of this table than it was trained on; answers in the later rows are "
        "less reliable."]
    assert notes.answer_notes == [
        f"The model read only the {encoder.trained_rows + 2} of the 300 rows and 2 of the 3 columns most "
        "related to this question (greyed cells were left out); a count or sum covers only those.",
        "Most words of this question are unknown to the model, so the answer is a guess; try other words."]
    for note in notes.answer_notes + notes.table_notes:
        assert "word piece" not in note and "[EMPTY]" not in note and "NONE" not in note


def table_qa_question(text: str):
    from tapas_tf.data.protos import interaction_pb2
    return interaction_pb2.Question(id="q", original_text=text, text=text)


def test_table_notes_say_the_tables_own_diagnostics_once_without_token_names(qa):
    # Not through an upload: pandas renames a CSV's repeated and empty column names ("city.1").
    frame = pd.DataFrame([["paris", "france", "2"]], columns=["city", "", "city"])
    session = web_sessions.SessionStore(2).open("odd.csv", qa.conversation(frame))
    table = web_sessions.table_view(session, LIMITS)
    assert table["notes"] == [
        "Columns share the names ['city']; the model tells them apart by position only.",
        "Some columns have no name; the model reads them as unnamed."]
    answer = web_sessions.answer_view(session, session.conversation.ask("which city?"), LIMITS, 1.0, "m")
    assert len(answer["diagnostics"]) == 2  # The ask API repeats them with each answer; the page does not:
    assert answer["notes"] == table["notes"] and answer["answer_notes"] == [] and answer["table_notes"] == []


# --- the command line ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_command_listens_on_loopback_and_answers(trained):
    port = _free_port()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    server = subprocess.Popen([sys.executable, "-m", "tapas_tf.serve", f"--model_dir={trained['model_dir']}",
                               f"--vocab_file={trained['vocab']}", f"--port={port}"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, server.stdout.read()[-3000:]
            try:
                info = requests.get(f"{url}/api/info", timeout=5).json()
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.5)
        assert info["model"] == "model"
        session = requests.post(f"{url}/api/table", params={"name": "cities.csv"}, data=CITIES_CSV,
                                timeout=30).json()["session"]
        answer = requests.post(f"{url}/api/ask", json={"session": session, "question": "which city?"}, timeout=30)
        assert answer.json()["answer"] == "paris, berlin, london"
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert f"http://127.0.0.1:{port}" in output  # uvicorn's log names the loopback address.


def test_serve_command_errors_are_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "tapas_tf.serve", f"--model_dir={tmp_path / 'nothing'}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("serve: error: ") and "nothing" in result.stderr
    assert "Traceback" not in result.stderr


# --- "check a statement": a TabFact model beside the question answering one ------------------------


@pytest.fixture(scope="module")
def tabfact_dir(tmp_path_factory):
    from tests.qa.test_fact_checker import TABFACT_OPTIONS
    from tests.inference.test_sequential import write_random_model_dir

    return write_random_model_dir(tmp_path_factory.mktemp("tabfact") / "model", **TABFACT_OPTIONS)


@pytest.fixture(scope="module")
def fact_checker(tabfact_dir):
    from tapas_tf.qa.fact_checker import TableFactChecker

    return TableFactChecker.from_model_dir(tabfact_dir, name="tiny-tabfact")


def test_the_fact_checker_loader_loads_on_first_call(tabfact_dir, tmp_path):
    from tapas_tf.qa.fact_checker import TableFactChecker

    assert web_app.fact_checker_loader("none") is None
    load = web_app.fact_checker_loader(tabfact_dir)  # A function (it was once an async context manager).
    assert callable(load) and load.name == "model"
    assert isinstance(load(), TableFactChecker)
    with pytest.raises((FileNotFoundError, ValueError)):
        web_app.fact_checker_loader(str(tmp_path))


def test_a_statement_is_checked_against_the_sessions_table(qa, fact_checker):
    loads = []

    def load():
        loads.append(1)
        return fact_checker

    load.name = "tiny-tabfact"
    with TestClient(web_app.create_app(qa, LIMITS, "trained-test-model", fact_checker=load),
                    raise_server_exceptions=False) as client:
        assert client.get("/api/info").json()["fact_checker"] == "tiny-tabfact" and not loads
        session = _upload(client).json()["session"]
        view = client.post("/api/verify", json={"session": session, "statement": " paris is in france "}).json()
        expected = fact_checker.verify(pd.DataFrame(ROWS, columns=HEADER), "paris is in france")
        assert view["statement"] == "paris is in france" and view["model"] == "tiny-tabfact"
        assert abs(view["probability"] - expected.probability) < 1e-5 and view["entailed"] == expected.entailed
        assert view["verdict_line"].startswith("True: the table supports" if expected.entailed
                                               else "False: the table refutes")
        assert f"{expected.probability:.2f}" in view["verdict_line"] and view["elapsed_ms"] > 0
        client.post("/api/verify", json={"session": session, "statement": "berlin is in germany"})
        assert loads == [1]  # Loaded with the first statement, once.
        # Checking leaves the conversation alone: the next question is still a first question.
        assert _ask(client, session, "which city?").json()["answer"] == "paris, berlin, london"
        empty = client.post("/api/verify", json={"session": session, "statement": "  "})
        assert empty.status_code == 400 and empty.json()["error"].startswith("the statement is empty")


def test_without_a_tabfact_model_checking_says_how_to_start_one(client):
    assert client.get("/api/info").json()["fact_checker"] is None
    session = _upload(client).json()["session"]
    response = client.post("/api/verify", json={"session": session, "statement": "paris is in france"})
    assert response.status_code == 404 and "--tabfact_model_dir" in response.json()["error"]


# --- collection mode: the server's collection, and files uploaded together ---------------------------

# Three tables that share no word: a question names the one it is about. cities.csv is the table the
# model was trained on, so its answers are known (see the module docstring).
COLLECTION_TABLES = {
    "cities.csv": CITIES_CSV,
    "rivers.csv": b"river,length\nnile,6650\namazon,6400\n",
    "mountains.csv": b"mountain,height\neverest,8849\nk2,8611\n",
}


def write_tables(folder, tables=COLLECTION_TABLES):
    """The tables as files of `folder` (created); the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in tables.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def collection_index(tmp_path_factory):
    """An index over COLLECTION_TABLES, as `tapas-tf index` writes it."""
    from tapas_tf.retrieval.collection import open_collection
    from tapas_tf.retrieval.table_index import build_index

    root = tmp_path_factory.mktemp("collection")
    build_index(open_collection(str(write_tables(root / "tables"))), root / "index")
    return root / "index"


@pytest.fixture
def collection_client(qa, collection_index):
    served = web_collections.load_served_collection(index_dir=str(collection_index), k=3)
    app = web_app.create_app(qa, LIMITS, "trained-test-model", collection=served)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_info_says_the_server_has_a_collection(client, collection_client):
    assert client.get("/api/info").json()["collection"] is None
    info = collection_client.get("/api/info").json()["collection"]
    assert (info["name"], info["tables"], info["method"], info["k"], info["uploaded"]) == ("tables", 3, "bm25", 3, False)
    assert info["source"].endswith("tables") and info["skipped"] == 0


def test_a_collection_answers_from_the_table_a_question_names_and_follow_ups_stay_with_it(collection_client):
    opened = collection_client.post("/api/collection", json={}).json()
    assert opened["name"] == "tables" and opened["collection"]["tables"] == 3 and opened["history"] == []
    assert (opened["rows"], opened["columns"], opened["table_html"]) == (0, 0, "")  # No table chosen yet.
    session = opened["session"]

    first = _ask(collection_client, session, "what population?").json()  # Only cities.csv has the word.
    assert (first["table_id"], first["table_title"]) == ("cities.csv", "cities")
    assert first["table_source"].endswith(os.path.join("tables", "cities.csv"))
    assert first["table_line"] == "From table cities (cities.csv)" and first["answer"] == "2"
    assert first["retrieval_rank"] == 1 and first["runners_up"] == [] and first["rows"] == 3
    assert first["table_html"].count('class="selected"') == 1

    # A follow-up reads the first answer's table, with that answer as its context ("which city?" after
    # paris's population is berlin), even where its words are another table's.
    follow_up = _ask(collection_client, session, "which city?").json()
    assert (follow_up["table_id"], follow_up["answer"], follow_up["follow_up"]) == ("cities.csv", "berlin", True)
    river = _ask(collection_client, session, "which river?").json()
    assert river["table_id"] == "cities.csv" and river["turn"] == 3 and river["runners_up"] == []
    assert river["table_line"] == "From table cities (cities.csv), the table of this conversation's first answer"

    # A new conversation chooses the table again.
    reset = collection_client.post("/api/reset", json={"session": session}).json()
    assert reset["history"] == [] and reset["table_html"] == "" and reset["collection"]["tables"] == 3
    again = _ask(collection_client, session, "which river?").json()
    assert again["table_id"] == "rivers.csv" and not again["follow_up"] and again["turn"] == 1


def test_a_collection_answer_lists_the_runners_up_with_their_scores(collection_client):
    session = collection_client.post("/api/collection", json={}).json()["session"]
    answer = _ask(collection_client, session, "which river or mountain?").json()
    [runner_up] = answer["runners_up"]
    assert {answer["table_id"], runner_up["table_id"]} == {"rivers.csv", "mountains.csv"}
    assert runner_up["title"] == runner_up["table_id"][:-4] and runner_up["retrieval_score"] > 0
    assert runner_up["combined_score"] <= answer["combined_score"] and runner_up["error"] is None
    assert set(runner_up) >= {"source", "retrieval_rank", "retrieval_probability", "answer", "confidence"}


def test_collection_errors_are_sentences(client, collection_client):
    missing = client.post("/api/collection", json={})
    assert missing.status_code == 404 and "--index_dir" in missing.json()["error"]
    session = collection_client.post("/api/collection", json={}).json()["session"]
    nothing = _ask(collection_client, session, "zzzz qqqq?")
    assert nothing.status_code == 400 and nothing.json()["error"].startswith("no table of tables shares a word")
    assert _ask(collection_client, session, "which river?").json()["table_id"] == "rivers.csv"  # Still serving.


def _upload_files(client, files):
    query, body = web_collections.upload_request(files)
    return client.post(f"/api/collection/upload?{query}", content=body,
                       headers={"Content-Type": "application/octet-stream"})


def test_files_uploaded_together_are_a_collection_and_a_bad_one_is_named(client):
    files = [("cities.csv", CITIES_CSV), ("rivers.tsv", b"river\tlength\nnile\t6650\namazon\t6400\n"),
             ("broken.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")]
    opened = _upload_files(client, files).json()
    collection = opened["collection"]
    assert (opened["name"], collection["tables"], collection["uploaded"]) == ("3 uploaded files", 2, True)
    assert collection["skipped"] == 1
    [skipped] = collection["skipped_files"]
    assert skipped["name"] == "broken.csv" and "holds NUL bytes" in skipped["reason"]
    answer = _ask(client, opened["session"], "which river?").json()
    assert (answer["table_id"], answer["table_source"]) == ("rivers.tsv", "uploaded rivers.tsv")
    assert answer["rows"] == 2 and answer["columns"] == 2  # Read as tab-separated.
    first = _ask(client, opened["session"], "what population?").json()
    assert first["table_id"] == "rivers.tsv"  # A follow-up: the conversation stays with rivers.tsv.
    client.post("/api/reset", json={"session": opened["session"]})
    assert _ask(client, opened["session"], "what population?").json()["answer"] == "2"  # cities.csv again.


def test_uploaded_files_are_checked_against_the_limits(client):
    rows = "".join(f"r{i},{i}\n" for i in range(1_001)).encode()
    files = [("long.csv", b"name,value\n" + rows), ("picture.png", b"\x89PNG"), ("cities.csv", CITIES_CSV),
             ("cities.txt", CITIES_CSV)]
    collection = _upload_files(client, files).json()["collection"]
    assert collection["tables"] == 1 and collection["skipped"] == 3
    reasons = {item["name"]: item["reason"] for item in collection["skipped_files"]}
    assert "1,001 rows" in reasons["long.csv"] and "not a CSV or TSV file" in reasons["picture.png"]
    assert "another of the uploaded files has the name cities.csv" in reasons["cities.txt"]

    bad = _upload_files(client, [("empty.csv", b""), ("header.csv", b"a,b\n")])
    assert bad.status_code == 400 and bad.json()["error"].startswith("none of the 2 files could be read")
    assert "empty.csv is empty" in bad.json()["error"]
    too_many = _upload_files(client, [(f"t{i}.csv", CITIES_CSV) for i in range(LIMITS.max_collection_files + 1)])
    assert too_many.status_code == 400 and "this page takes at most 20 at once" in too_many.json()["error"]
    small = web_sessions.WebLimits(max_upload_bytes=200, max_collection_bytes=300)
    with TestClient(web_app.create_app(client.app.state.web.qa, small), raise_server_exceptions=False) as c:
        too_big = _upload_files(c, [("a.csv", CITIES_CSV), ("b.csv", CITIES_CSV * 5)])
        assert too_big.status_code == 413 and "larger than 300 bytes together" in too_big.json()["error"]
    wrong = client.post("/api/collection/upload?name=a.csv&size=5", content=b"abc")
    assert wrong.status_code == 400 and "sizes add up to 5" in wrong.json()["error"]
    assert client.post("/api/collection/upload", content=b"").status_code == 400


def test_an_uploaded_collection_goes_with_its_session(qa):
    with TestClient(web_app.create_app(qa, LIMITS), raise_server_exceptions=False) as c:
        web = c.app.state.web
        session = _upload_files(c, [("cities.csv", CITIES_CSV), ("rivers.csv", COLLECTION_TABLES["rivers.csv"])])
        folder = web.sessions.get(session.json()["session"]).keeps.name
        assert os.path.isdir(folder)
        for _ in range(LIMITS.max_sessions):  # Pushes it out (the least recently used first).
            _upload(c)
        import gc
        gc.collect()
        assert not os.path.exists(folder)


def test_statements_in_a_collection_are_checked_against_its_chosen_table(qa, collection_index, fact_checker):
    served = web_collections.load_served_collection(index_dir=str(collection_index))
    app = web_app.create_app(qa, LIMITS, "m", fact_checker=fact_checker, collection=served)
    with TestClient(app, raise_server_exceptions=False) as c:
        session = c.post("/api/collection", json={}).json()["session"]
        early = c.post("/api/verify", json={"session": session, "statement": "paris is in france"})
        assert early.status_code == 400 and early.json()["error"].startswith("ask a question first")
        _ask(c, session, "what population?")
        view = c.post("/api/verify", json={"session": session, "statement": "paris is in france"}).json()
        expected = fact_checker.verify(pd.DataFrame(ROWS, columns=HEADER), "paris is in france")
        assert abs(view["probability"] - expected.probability) < 1e-5


def test_a_served_collection_is_loaded_or_indexed_with_clear_errors(tmp_path, caplog):
    import logging

    from tapas_tf.retrieval.collection import CollectionError
    from tapas_tf.retrieval.table_index import IndexError_

    with pytest.raises(IndexError_, match="no such index directory"):
        web_collections.load_served_collection(index_dir=str(tmp_path / "nothing"))
    with pytest.raises(CollectionError, match="no such file or directory"):
        web_collections.load_served_collection(tables=str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="not both"):
        web_collections.load_served_collection(index_dir="a", tables="b")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "blank.csv").write_bytes(b"")
    with pytest.raises(IndexError_, match="no table could be read"):
        web_collections.load_served_collection(tables=str(tmp_path / "empty"))

    folder = write_tables(tmp_path / "tables", dict(COLLECTION_TABLES, **{"broken.csv": b"\x00\x01"}))
    (tmp_path / "titles.tsv").write_text("table_id\ttitle\ncities.csv\tEuropean cities\n")
    with caplog.at_level(logging.INFO, logger="tapas_tf.serving.web_collections"):
        served = web_collections.load_served_collection(tables=str(folder), titles=str(tmp_path / "titles.tsv"))
    assert "indexed 3 tables of" in caplog.text and "skipped 1 binary" in caplog.text
    assert (served.info.tables, served.info.skipped) == (3, 1)
    assert served.info.skipped_files[0]["name"].endswith("broken.csv")
    assert served.index.tables.at["cities.csv", "title"] == "European cities"
    index_dir = served.keeps.name
    assert os.path.isdir(index_dir)
    served.keeps.cleanup()


def test_serve_collection_errors_are_one_line(tmp_path):
    for flags, expected, code in [([f"--index_dir={tmp_path / 'nothing'}"], "no such index directory", 1),
                                  ([f"--tables={tmp_path / 'nothing'}"], "no such file or directory", 1),
                                  (["--index_dir=a", "--tables=b"], "give --index_dir or --tables, not both", 2)]:
        result = subprocess.run([sys.executable, "-m", "tapas_tf.serve", *flags], cwd=ROOT, capture_output=True,
                                text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        assert result.returncode == code, result.stderr[-2000:]
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("serve: error: ") and expected in last, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
