"""The web page end to end in a real headless browser: Debian's chromium and chromedriver, Selenium.

The server runs in this process on a free loopback port (`web_app.ServerThread`) with the trained
model of test_sequential; the browser uploads a CSV file the test writes, asks, follows up, starts a
new conversation, and gets readable messages for a bad file and an empty question. In collection
mode (a second server, started on a folder of three tables) the page names the table of each answer
and the other tables read, follow-ups stay with the first answer's table, and several files
uploaded together are asked as a collection, with the file that could not be read named. The page is for
people: rows are numbered, answers are in plain words, the latest answer stays in view beside a
long table, and the page has an icon.

Without /usr/bin/chromium and /usr/bin/chromedriver the tests skip, unless TAPAS_TF_REQUIRE_BROWSER=1
(as `.ci/run` sets after installing them), where a missing browser fails.
"""

import os
import shutil

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("starlette", reason="the web extra: pip install 'tapas-tf[web]'")
pytest.importorskip("selenium")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.serving import web_app  # noqa: E402
from tests.inference.test_sequential import HEADER, ROWS  # noqa: E402
from tests.serving.test_web_app import sum_of_column  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
# Chromium as root in a container, on a machine without network: no sandbox, no background traffic.
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                  "--no-first-run", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--window-size=1200,900")
WAIT_SECONDS = 60


def _browser_available() -> bool:
    return all(shutil.which(path) or os.access(path, os.X_OK) for path in (CHROMIUM, CHROMEDRIVER))


if not _browser_available():
    if os.environ.get("TAPAS_TF_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"TAPAS_TF_REQUIRE_BROWSER=1 but {CHROMIUM} or {CHROMEDRIVER} is missing; "
                           "apt-get install chromium chromium-driver")
    pytest.skip(f"no {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)",
                allow_module_level=True)


def start_browser(user_data_dir: str) -> webdriver.Chrome:
    """Headless Debian chromium through its chromedriver; Selenium downloads nothing."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # The console, for 404s.
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))


@pytest.fixture(scope="module")
def page(trained, tmp_path_factory):
    """(browser, server url): the server with the trained model (and a tiny TabFact model for "check a
    statement"), the page open and ready."""
    from tapas_tf.qa.fact_checker import TableFactChecker
    from tests.inference.test_sequential import write_random_model_dir
    from tests.qa.test_fact_checker import TABFACT_OPTIONS

    qa = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"])
    tabfact_dir = write_random_model_dir(tmp_path_factory.mktemp("tabfact") / "model", **TABFACT_OPTIONS)
    checker = TableFactChecker.from_model_dir(tabfact_dir, name="tiny-tabfact")
    app = web_app.create_app(qa, model_name="trained-test-model", fact_checker=checker)
    with web_app.ServerThread(app) as server:
        assert server.url.startswith("http://127.0.0.1:")
        browser = start_browser(str(tmp_path_factory.mktemp("chromium-profile")))
        try:
            browser.get(server.url)
            _wait(browser).until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
            yield browser, server.url, qa
        finally:
            browser.quit()


def _wait(browser) -> WebDriverWait:
    return WebDriverWait(browser, WAIT_SECONDS)


def _upload(browser, path: str) -> None:
    browser.find_element(By.ID, "file").send_keys(path)


def _ask(browser, question: str) -> str:
    """Asks and waits for the answer; the answer's text."""
    before = len(browser.find_elements(By.CSS_SELECTOR, "#conversation > li"))
    box = browser.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    browser.find_element(By.ID, "ask").click()
    _wait(browser).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#conversation > li")) == before + 1)
    return browser.find_elements(By.CSS_SELECTOR, "#conversation > li .answer")[-1].text


def _selected(browser):
    """[(row, column, text, title)] of the highlighted cells."""
    return [(int(cell.get_attribute("data-row")), int(cell.get_attribute("data-column")), cell.text,
             cell.get_attribute("title")) for cell in browser.find_elements(By.CSS_SELECTOR, "#table td.selected")]


def _row_numbers(browser):
    """[(number shown in the first column, data-row of the row's cells)] of the table's body rows."""
    return [tuple(pair) for pair in browser.execute_script("""
        return Array.from(document.querySelectorAll("#table tbody tr:not(.elided)"), (row) =>
          [row.firstElementChild.textContent, row.querySelector("td[data-row]").dataset.row]);""")]


def _in_viewport(browser, element) -> bool:
    """Whether the element lies wholly inside the window (its bounding box against innerHeight)."""
    top, bottom, height = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom, window.innerHeight];",
        element)
    return 0 <= top and bottom <= height


def test_upload_ask_follow_up_and_start_over(page, tmp_path):
    browser, *_ = page
    table = tmp_path / "cities.csv"
    pd.DataFrame(ROWS, columns=HEADER).to_csv(table, index=False)
    _upload(browser, str(table))
    _wait(browser).until(expected_conditions.visibility_of_element_located((By.ID, "table-panel")))
    assert browser.find_element(By.ID, "table-name").text == "cities.csv"
    assert browser.find_element(By.ID, "table-info").text == "cities.csv: 3 rows, 3 columns"
    assert [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#table thead th")] == ["#"] + HEADER
    assert _row_numbers(browser) == [("0", "0"), ("1", "1"), ("2", "2")]

    assert _ask(browser, "what population?") == "A: 2"
    [(row, column, text, title)] = _selected(browser)
    assert (row, column, text) == (0, 2, "2") and title.startswith("p = ")
    assert float(title[4:]) > 0.5  # The probability shown on hover.
    # A lookup names no operator (the page said "operator NONE: ..." before), and says who answered.
    assert not browser.find_elements(By.CSS_SELECTOR, "#conversation .operator")[-1].is_displayed()
    assert "NONE" not in browser.find_element(By.ID, "conversation").text
    assert browser.find_elements(By.CSS_SELECTOR, "#conversation .timing")[-1].text.startswith(
        "Answered by trained-test-model in ")

    assert _ask(browser, "which city?") == "A: berlin"  # The follow-up sees paris's population.
    assert [(r, c, t) for r, c, t, _ in _selected(browser)] == [(1, 0, "berlin")]
    questions = [q.text for q in browser.find_elements(By.CSS_SELECTOR, "#conversation .question")]
    assert questions == ["Q: what population?", "Q: which city?"]

    browser.find_element(By.ID, "new-conversation").click()
    _wait(browser).until(lambda b: not b.find_elements(By.CSS_SELECTOR, "#conversation > li"))
    assert _selected(browser) == []
    assert _ask(browser, "which city?") == "A: paris, berlin, london"
    assert [t for _, _, t, _ in _selected(browser)] == ["paris", "berlin", "london"]


def _error_text(browser) -> str:
    _wait(browser).until(expected_conditions.visibility_of_element_located((By.ID, "error")))
    return browser.find_element(By.ID, "error").text


def test_bad_upload_and_empty_question_show_a_message(page, tmp_path):
    browser, *_ = page
    picture = tmp_path / "picture.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    _upload(browser, str(picture))
    assert _error_text(browser) == ("Error: picture.png is not a CSV file: choose a .csv file with a header row")

    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    _upload(browser, str(empty))
    _wait(browser).until(lambda b: "empty.csv is empty" in b.find_element(By.ID, "error").text)

    table = tmp_path / "cities.csv"
    pd.DataFrame(ROWS, columns=HEADER).to_csv(table, index=False)
    _upload(browser, str(table))
    _wait(browser).until(lambda b: not b.find_element(By.ID, "error").is_displayed())
    browser.find_element(By.ID, "question").clear()
    browser.find_element(By.ID, "ask").click()
    assert "the question is empty" in _error_text(browser)
    assert _ask(browser, "which city?") == "A: paris, berlin, london"  # The page and the server go on.


def test_an_example_table_loads_and_answers(page):
    browser, *_ = page
    names = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#example option")]
    assert "shooting_1988_medals.csv" in names
    browser.find_element(By.CSS_SELECTOR, "#example option[value='shooting_1988_medals.csv']").click()
    browser.find_element(By.ID, "load-example").click()
    _wait(browser).until(lambda b: b.find_element(By.ID, "table-name").text == "shooting_1988_medals.csv")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#table tbody tr")) > 5
    assert _ask(browser, "which nation?").startswith("A: ")


def test_an_aggregation_answer_shows_the_executed_value(page, tmp_path, monkeypatch):
    browser, _, qa = page
    table = tmp_path / "cities.csv"
    pd.DataFrame(ROWS, columns=HEADER).to_csv(table, index=False)
    _upload(browser, str(table))
    _wait(browser).until(lambda b: b.find_element(By.ID, "table-info").text == "cities.csv: 3 rows, 3 columns")
    monkeypatch.setattr(qa, "_call", sum_of_column(2))  # The server thread answers with it.
    assert _ask(browser, "what is the total population?") == "A: Sum of 3 cells = 14"  # Was "SUM of ...".
    operator = browser.find_elements(By.CSS_SELECTOR, "#conversation .operator")[-1].text
    assert operator == "2 + 4 + 8 = 14"  # Was "operator SUM (p = 1.00) executed on the 3 selected cells; …".
    details = browser.find_elements(By.CSS_SELECTOR, "#conversation details")[-1]
    assert not details.find_element(By.TAG_NAME, "ul").is_displayed()  # Folded until opened.
    details.find_element(By.TAG_NAME, "summary").click()
    assert "The model chose to sum the highlighted cells with probability 1.00." in details.text
    assert [t for _, _, t, _ in _selected(browser)] == ["2", "4", "8"]


def test_the_latest_answer_stays_beside_a_long_table(page, tmp_path, monkeypatch):
    browser, _, qa = page
    monkeypatch.setattr(qa, "windows", False)  # The pruned layout; windows: the test below.
    table = tmp_path / "towns.csv"
    rows = [[f"town{i}", f"land{i}", str(i)] for i in range(200)]
    pd.DataFrame(rows, columns=HEADER).to_csv(table, index=False)
    _upload(browser, str(table))
    info = "towns.csv: 200 rows, 3 columns"
    _wait(browser).until(lambda b: b.find_element(By.ID, "table-info").text == info)
    # Every body row shows its number (0-based, as the ask API counts) in the first column.
    numbers = _row_numbers(browser)
    assert len(numbers) == 200 and all(shown == row == str(i) for i, (shown, row) in enumerate(numbers))
    box = browser.find_element(By.ID, "table")
    assert browser.execute_script("return arguments[0].scrollHeight > arguments[0].clientHeight", box)
    for question in ("which city?", "which country?", "what population?", "which city?", "which country?"):
        _ask(browser, question)
        latest = browser.find_elements(By.CSS_SELECTOR, "#conversation > li")[-1]
        assert _in_viewport(browser, latest.find_element(By.CLASS_NAME, "answer")), question
        assert _in_viewport(browser, browser.find_element(By.ID, "question"))
        # Reading the end of the table keeps the answer in view too (the page used to scroll it away).
        last_row = browser.find_elements(By.CSS_SELECTOR, "#table tbody tr")[-1]  # Each answer redraws it.
        browser.execute_script("arguments[0].scrollIntoView()", last_row)
        assert _in_viewport(browser, last_row)
        assert _in_viewport(browser, latest.find_element(By.CLASS_NAME, "answer"))
    # Pruning matters to each answer and stays with it; routine notes are said once, above the table.
    answer_notes = browser.find_elements(By.CSS_SELECTOR, "#conversation > li")[-1].find_element(
        By.CLASS_NAME, "notes").text
    assert answer_notes.startswith("The model read only the ") and "of the 200 rows" in answer_notes
    table_notes = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#table-notes li")]
    assert table_notes and len(table_notes) == len(set(table_notes)), table_notes
    visible = browser.find_element(By.ID, "conversation").text
    assert "word pieces" not in visible and "row embeddings" not in visible and "NONE" not in visible
    # The table scrolls in its own box, its header row staying on top; the page itself does not scroll.
    browser.execute_script("arguments[0].scrollTop = arguments[0].scrollHeight", box)
    header_top, box_top = browser.execute_script(
        "return [document.querySelector('#table thead th').getBoundingClientRect().top,"
        " arguments[0].getBoundingClientRect().top]", box)
    assert abs(header_top - box_top) <= 2
    assert browser.execute_script("return document.documentElement.scrollHeight <= window.innerHeight + 1")
    assert _in_viewport(browser, browser.find_elements(By.CSS_SELECTOR, "#conversation .answer")[-1])

    browser.set_window_size(600, 900)  # A narrow window stacks the panels: the answer comes first.
    try:
        _ask(browser, "which country?")
        assert _in_viewport(browser, browser.find_elements(By.CSS_SELECTOR, "#conversation .answer")[-1])
    finally:
        browser.set_window_size(1200, 900)


def test_the_page_has_an_icon_and_no_missing_resource(page):
    browser, url, _ = page
    browser.get_log("browser")  # Reading the log empties it: what earlier tests left is not this page's.
    browser.get(url)  # A fresh load; its console is what the check below reads.
    _wait(browser).until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    icon = browser.execute_script("return document.querySelector('link[rel=icon]').href")
    assert icon == f"{url}/static/favicon.svg"
    statuses = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const paths = [arguments[0], "/favicon.ico"];
        Promise.all(paths.map((path) => fetch(path).then((response) => response.status))).then(done);""",
        icon)
    assert statuses == [200, 200]
    # "status of 404", not "404": the server's random port may hold those digits (127.0.0.1:40413).
    assert not [entry for entry in browser.get_log("browser") if "status of 404" in entry["message"]]


def test_check_a_statement_shows_the_verdict_and_keeps_the_conversation(page, tmp_path):
    browser, url, qa = page
    table = tmp_path / "cities.csv"
    pd.DataFrame(ROWS, columns=HEADER).to_csv(table, index=False)
    _upload(browser, str(table))
    _wait(browser).until(expected_conditions.visibility_of_element_located((By.ID, "table-panel")))
    mode = browser.find_element(By.ID, "mode")
    assert mode.is_displayed() and "checked by tiny-tabfact" in browser.find_element(By.ID, "model").text
    mode.find_element(By.CSS_SELECTOR, "option[value=verify]").click()
    assert browser.find_element(By.ID, "ask").text == "Check"
    assert "statement" in browser.find_element(By.ID, "question").get_attribute("placeholder")
    verdict = _ask(browser, "paris is in france")
    item = browser.find_elements(By.CSS_SELECTOR, "#conversation > li")[-1]
    probability = float(item.get_attribute("data-probability"))
    assert verdict.startswith("True: the table supports" if probability >= 0.5 else "False: the table refutes")
    assert f"P(entailed) = {probability:.2f}" in verdict
    assert item.find_element(By.CSS_SELECTOR, ".question").text == "Statement: paris is in france"
    mode.find_element(By.CSS_SELECTOR, "option[value=ask]").click()
    assert _ask(browser, "which city?") == "A: paris, berlin, london"  # Still a first question.


# --- collection mode ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collection_page(trained, tmp_path_factory):
    """(browser, folder of the tables): a server started on a folder of three tables (as `serve
    --tables=DIR` starts it), the page open in collection mode."""
    from tapas_tf.serving import web_collections
    from tests.serving.test_web_app import write_tables

    folder = write_tables(tmp_path_factory.mktemp("collection") / "my_tables")
    served = web_collections.load_served_collection(tables=str(folder), k=3)
    qa = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"])
    app = web_app.create_app(qa, model_name="trained-test-model", collection=served)
    with web_app.ServerThread(app) as server:
        browser = start_browser(str(tmp_path_factory.mktemp("chromium-collection-profile")))
        try:
            browser.get(server.url)
            _wait(browser).until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
            yield browser, folder
        finally:
            browser.quit()
    served.keeps.cleanup()


def _from_table(browser) -> str:
    return browser.find_elements(By.CSS_SELECTOR, "#conversation > li .from-table")[-1].text


def test_collection_mode_shows_the_table_that_answered_and_stays_with_it(collection_page):
    browser, folder = collection_page
    assert browser.find_element(By.ID, "collection-info").text == (
        f"Collection mode: 3 tables from {folder}. Each answer says which table it comes from.")
    assert browser.find_element(By.ID, "collection-line").text == f"Collection my_tables: 3 tables from {folder}"
    assert browser.find_element(By.ID, "table-name").text == "the collection my_tables"
    hint = browser.find_element(By.ID, "collection-hint")
    assert hint.is_displayed() and "reads the 3 tables that match it best" in hint.text
    assert not browser.find_elements(By.CSS_SELECTOR, "#table table")  # No table until an answer chooses one.

    assert _ask(browser, "what population?") == "A: 2"
    assert _from_table(browser) == "From table cities (cities.csv)"
    assert browser.find_element(By.ID, "table-info").text == "From table cities (cities.csv): 3 rows, 3 columns"
    assert [(r, c, t) for r, c, t, _ in _selected(browser)] == [(0, 2, "2")] and not hint.is_displayed()
    # A follow-up stays with the first answer's table, though its words are another table's.
    _ask(browser, "which river?")
    assert _from_table(browser) == "From table cities (cities.csv), the table of this conversation's first answer"
    assert browser.find_element(By.ID, "table-info").text.startswith("From table cities (cities.csv)")

    browser.find_element(By.ID, "new-conversation").click()  # The next question chooses the table again.
    _wait(browser).until(lambda b: not b.find_elements(By.CSS_SELECTOR, "#conversation > li"))
    assert hint.is_displayed() and not browser.find_elements(By.CSS_SELECTOR, "#table table")
    _ask(browser, "which river or mountain?")
    chosen = _from_table(browser)
    latest = browser.find_elements(By.CSS_SELECTOR, "#conversation > li")[-1]
    others = latest.find_element(By.CLASS_NAME, "runners-up")
    assert others.is_displayed() and others.text.startswith("Other tables read (1):")
    expected = {"From table rivers (rivers.csv)": "mountains (mountains.csv): ",
                "From table mountains (mountains.csv)": "rivers (rivers.csv): "}
    assert chosen in expected and expected[chosen] in others.text and "retrieval score" in others.text


def test_files_uploaded_together_are_asked_as_a_collection(collection_page, tmp_path):
    browser, folder = collection_page
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    _upload(browser, "\n".join([str(folder / "cities.csv"), str(folder / "rivers.csv"), str(broken)]))
    line = browser.find_element(By.ID, "collection-line")
    _wait(browser).until(lambda b: line.text == "3 uploaded files: 2 tables (1 file not read)")
    [skipped] = browser.find_elements(By.CSS_SELECTOR, "#skipped-files li")
    assert skipped.text.startswith("Not read: broken.csv holds NUL bytes")
    assert browser.find_element(By.ID, "table-name").text == "3 uploaded files"
    _ask(browser, "which river?")
    assert _from_table(browser) == "From table rivers (rivers.csv)"

    browser.find_element(By.ID, "open-collection").click()  # Back to the server's collection.
    _wait(browser).until(lambda b: line.text.startswith("Collection my_tables: 3 tables"))
    assert not browser.find_elements(By.CSS_SELECTOR, "#skipped-files li")
    assert _ask(browser, "what population?") == "A: 2" and _from_table(browser) == "From table cities (cities.csv)"


def test_a_big_table_read_in_windows_keeps_its_answer_in_view(page, tmp_path):
    """300 rows, more than one example holds: every row is read; the page says so once, above the
    table, and a lookup that selects many cells names the first dozen and keeps them highlighted."""
    browser, *_ = page
    table = tmp_path / "towns.csv"
    pd.DataFrame([[f"town{i}", f"land{i}", str(i)] for i in range(300)], columns=HEADER).to_csv(table, index=False)
    _upload(browser, str(table))
    _wait(browser).until(lambda b: b.find_element(By.ID, "table-info").text == "towns.csv: 300 rows, 3 columns")
    for question in ("which city?", "what population?"):
        _ask(browser, question)
        latest = browser.find_elements(By.CSS_SELECTOR, "#conversation > li")[-1]
        assert _in_viewport(browser, latest.find_element(By.CLASS_NAME, "answer")), question
        assert len(latest.find_element(By.CLASS_NAME, "answer").text) < 400
    table_notes = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#table-notes li")]
    assert any("reads every row, in windows" in note for note in table_notes), table_notes
    assert not browser.find_elements(By.CSS_SELECTOR, "#table td.pruned")
