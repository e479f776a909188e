"""The web page on real WikiTableQuestions tables: answer latency over HTTP, and the README's screenshot.

    python benchmarks/web_page.py --screenshot docs/web_page.png --json_out /tmp/web_page.json

Starts `python -m tapas_tf.serve`'s app (`web_app.create_app`, warmed up like the command) on a free
loopback port with --model_dir (default: the bundled tiny SQA model), then:

1. Latency: for the first --num_questions questions of --wtq_dir/random-split-1-dev.tsv, uploads
   the question's table (POST /api/table, timed: reading and converting the table) and asks
   (POST /api/ask, timed from the client: the round trip the page sees). Tables that the page
   refuses (too big, unreadable) are counted with the server's message.
2. Screenshot: headless Debian chromium (Selenium, /usr/bin/chromedriver) uploads --screenshot_table
   through the page's file input, asks --screenshot_questions as one conversation, and saves the page.

Prints a markdown summary; --json_out gets every timing and answer. Needs the web extra and, for the
screenshot, `apt-get install chromium chromium-driver`.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Dict, List  # noqa: E402

import requests  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.serving import web_app  # noqa: E402

DEFAULT_QUESTIONS = ["which city had the most passengers?", "which of them are in canada?",
                     "how many passengers flew to them?"]


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", default=None, help="a tapas-tf model directory; default the bundled model")
    parser.add_argument("--wtq_dir", default=os.path.join(ROOT, "..", "shared", "datasets", "wtq"))
    parser.add_argument("--num_questions", type=int, default=200)
    parser.add_argument("--screenshot", default=None, help="where to save the PNG (none: no browser)")
    parser.add_argument("--screenshot_table", default=None,
                        help="CSV to upload; default --wtq_dir/csv/203-csv/515.csv (Playa de Oro airport)")
    parser.add_argument("--screenshot_questions", nargs="+", default=DEFAULT_QUESTIONS)
    parser.add_argument("--json_out", default=None)
    return parser.parse_args(argv)


def dev_questions(wtq_dir: str, count: int) -> List[Dict[str, str]]:
    with open(os.path.join(wtq_dir, "random-split-1-dev.tsv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[:count]


def time_http(url: str, wtq_dir: str, questions: List[Dict[str, str]]) -> Dict:
    """Upload and ask per question over HTTP; milliseconds measured by the client."""
    uploads, asks, refused, answers = [], [], {}, []
    for row in questions:
        path = os.path.join(wtq_dir, row["context"])
        with open(path, "rb") as f:
            data = f.read()
        start = time.perf_counter()
        table = requests.post(f"{url}/api/table", params={"name": os.path.basename(path)}, data=data, timeout=60)
        uploads.append((time.perf_counter() - start) * 1000)
        if table.status_code != 200:
            refused[row["id"]] = table.json()["error"]
            continue
        start = time.perf_counter()
        answer = requests.post(f"{url}/api/ask", json={"session": table.json()["session"],
                                                       "question": row["utterance"]}, timeout=60)
        asks.append((time.perf_counter() - start) * 1000)
        body = answer.json()
        if answer.status_code != 200:
            refused[row["id"]] = body["error"]
            continue
        answers.append({"id": row["id"], "question": row["utterance"], "answer": body["answer"],
                        "target": row["targetValue"], "ms": round(asks[-1], 1), "server_ms": body["elapsed_ms"],
                        "sequence_length": body["sequence_length"], "diagnostics": body["diagnostics"]})
    return {"upload_ms": uploads, "ask_ms": asks, "refused": refused, "answers": answers}


def _quantiles(values: List[float]) -> Dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "p90": ordered[int(0.9 * (len(ordered) - 1))],
            "max": ordered[-1], "n": len(ordered)}


def screenshot(url: str, table: str, questions: List[str], out: str) -> List[Dict]:
    """Drives the page in headless chromium; the conversation as the page shows it."""
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1280,1000", "--hide-scrollbars"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}")
    browser = webdriver.Chrome(options=options,
                               service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))
    wait = WebDriverWait(browser, 60)
    try:
        browser.get(url)
        wait.until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        browser.find_element(By.ID, "file").send_keys(os.path.abspath(table))
        wait.until(lambda b: b.find_element(By.ID, "table-panel").is_displayed())
        for turn, question in enumerate(questions, 1):
            box = browser.find_element(By.ID, "question")
            box.send_keys(question)
            browser.find_element(By.ID, "ask").click()
            wait.until(lambda b, n=turn: len(b.find_elements(By.CSS_SELECTOR, "#conversation > li")) == n)
        # The whole page, not the window: resize to its height before the capture.
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1280, min(max(height + 40, 600), 2400))
        browser.save_screenshot(out)
        return [{"question": item.find_element(By.CLASS_NAME, "question").text,
                 "answer": item.find_element(By.CLASS_NAME, "answer").text,
                 "operator": item.find_element(By.CLASS_NAME, "operator").text,
                 "round_trip_ms": float(item.get_attribute("data-round-trip-ms"))}
                for item in browser.find_elements(By.CSS_SELECTOR, "#conversation > li")]
    finally:
        browser.quit()


def main(argv: List[str]) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    qa = TableQA.from_model_dir(args.model_dir)
    lengths = qa.warm_up()
    warm_seconds = time.perf_counter() - start
    name = qa.name
    report: Dict = {"model": name, "machine": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(), "load_and_warm_up_seconds": round(warm_seconds, 1),
                    "warmed_lengths": list(lengths)}
    with web_app.ServerThread(web_app.create_app(qa, model_name=name)) as server:
        http = time_http(server.url, args.wtq_dir, dev_questions(args.wtq_dir, args.num_questions))
        report.update(http)
        report["upload_summary"] = _quantiles(http["upload_ms"])
        report["ask_summary"] = _quantiles(http["ask_ms"])
        if args.screenshot:
            table = args.screenshot_table or os.path.join(args.wtq_dir, "csv", "203-csv", "515.csv")
            report["screenshot"] = {"file": args.screenshot, "table": table,
                                    "conversation": screenshot(server.url, table, args.screenshot_questions,
                                                               args.screenshot)}
    print(f"model {name}; load and warm-up {warm_seconds:.1f} s ({len(lengths)} lengths)")
    print("| request | n | median ms | p90 ms | max ms |\n|---|---|---|---|---|")
    for label, key in (("POST /api/table (read and convert)", "upload_summary"),
                       ("POST /api/ask (round trip)", "ask_summary")):
        q = report[key]
        print(f"| {label} | {q['n']} | {q['median']:.1f} | {q['p90']:.1f} | {q['max']:.1f} |")
    print(f"refused: {len(http['refused'])}: " + "; ".join(sorted(set(http["refused"].values()))[:5]))
    for turn in report.get("screenshot", {}).get("conversation", []):
        print(f"{turn['question']} -> {turn['answer']} ({turn['operator']}; {turn['round_trip_ms']:.0f} ms)")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
