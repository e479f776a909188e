"""Every `tapas-tf` command line that the README and docs/COMMANDS.md show, run as written.

The lines are read from the pages' ```bash blocks (continuation lines joined, trailing comments
dropped) and run in order, in a fresh process each, in a directory where the data a user would
download sits at the path the line names: a tiny TabFact release in `path/to/tabfact`, a Hugging
Face checkpoint in `path/to/tapas-base-finetuned-wtq`, two rendered pages in `wtq_pages/`. Only
training is made tiny (`--train_steps=2 --train_batch_size=2`), and `serve` is started, asked for
its page and stopped. Each line's work is checked (`CHECKS`): files written and counted, a
checkpoint, a SavedModel with its signatures, an answer printed. A new documented line runs here
without a change, and fails here if it cannot run as written.
"""

import glob
import gzip
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Callable, Dict, List

from tests.test_tabfact_task import _release as write_tabfact_release

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The installed console script, as a user types it (`python -m` would import a `tapas_tf/` folder of
# the working directory, which these lines' tables live in, instead of the package).
TAPAS_TF = [os.path.join(os.path.dirname(sys.executable), "tapas-tf")]
HF_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "tabfact_hf")
TINY_TRAINING = ["--train_steps=2", "--train_batch_size=2", "--noprogress_bar"]
PAGE = ("<!-- http%3A//en.wikipedia.org/wiki%3Faction%3Drender%26curid%3D{id} 2014-06-13 -->\n"
        "<p>{title} is a page about a season.</p><h2>Results</h2><p>The results of the year are below.</p>"
        '<table class="wikitable"><tr><th>Team</th><th>Points</th></tr>'
        "<tr><td>Lions</td><td>10</td></tr><tr><td>Bears</td><td>7</td></tr><tr><td>Owls</td><td>3</td></tr></table>")


def documented_command_lines(page: str) -> List[str]:
    """The `tapas-tf ...` lines of a page's ```bash blocks, continuations joined, comments dropped."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if line.startswith("tapas-tf "):
                lines.append(_without_comment(line))
    return lines


def _without_comment(line: str) -> str:
    """The line without a trailing `# ...` comment outside quotes."""
    return shlex.join(shlex.split(line, comments=True))


def _records(pattern: str) -> int:
    import tensorflow as tf

    return sum(1 for path in glob.glob(pattern) for _ in tf.data.TFRecordDataset(path))


def _flag(args: List[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert values, f"--{name} not in {args}"
    return values[-1]


def _check_sample_data(cwd, args, result):
    assert os.path.exists(os.path.join(cwd, _flag(args, "output_dir"), "random-split-1-train.tsv"))


def _check_create_data(cwd, args, result):
    out = os.path.join(cwd, _flag(args, "output_dir"))
    report = json.load(open(os.path.join(out, "conversion_report.json")))
    written = report["splits"]["train"]["examples_written"]
    assert written > 0 and written == _records(os.path.join(out, "tf_examples", "train.tfrecord"))


def _check_train(cwd, args, result):
    model_dir = os.path.join(cwd, _flag(args, "model_dir"))
    assert glob.glob(os.path.join(model_dir, "checkpoints", "ckpt-2.index")), result.stderr[-2000:]


def _check_predict_and_evaluate(cwd, args, result):
    (metrics,) = glob.glob(os.path.join(cwd, _flag(args, "model_dir"), "predictions", "*dev*_metrics.json"))
    assert json.load(open(metrics))


def _check_export(cwd, args, result):
    import tensorflow as tf

    loaded = tf.saved_model.load(os.path.join(cwd, _flag(args, "export_dir"), "1"))
    assert set(loaded.signatures) == {"serving_default", "predict_features"}


def _check_make_statements(cwd, args, result):
    statements = json.load(open(os.path.join(cwd, _flag(args, "output_dir"), "train_examples.json")))
    assert statements and all(len(entry[0]) == len(entry[1]) for entry in statements.values())


def _check_verify(cwd, args, result):
    assert re.search(r"\b(entailed|refuted|true|false)\b", result.stdout, flags=re.IGNORECASE), result.stdout


def _check_model_dir(cwd, args, result):
    model_dir = os.path.join(cwd, _flag(args, "model_dir"))
    assert json.load(open(os.path.join(model_dir, "tapas_config.json")))["hidden_size"] > 0
    assert glob.glob(os.path.join(model_dir, "checkpoints", "*.index"))


def _check_create_pretrain_data(cwd, args, result):
    out = os.path.join(cwd, _flag(args, "output_dir"))
    counters = json.load(open(os.path.join(out, "pretrain_report.json")))["counters"]
    assert counters["examples_written_train"] > 0
    for split in ("train", "test"):
        assert counters[f"examples_written_{split}"] == _records(os.path.join(out, "tf_examples", f"{split}-*.tfrecord"))


def _check_collect_tables(cwd, args, result):
    assert _records(os.path.join(cwd, _flag(args, "output"))) > 0


def _check_evaluate(cwd, args, result):
    metrics = json.load(open(os.path.join(cwd, _flag(args, "model_dir"), "eval_pretrain", "metrics.json")))
    assert metrics


def _check_ask(cwd, args, result):
    assert re.search(r"^A: \S", result.stdout, flags=re.MULTILINE), result.stdout
    if any(a.startswith("--index_dir=") for a in args):  # Over a collection the answer names the table it came from.
        assert result.stdout.startswith("From table aerial_lift_pylons.csv"), result.stdout


def _check_index(cwd, args, result):
    header = json.load(open(os.path.join(cwd, _flag(args, "index_dir"), "index.json")))
    # Without --dense_model the bundled retriever embeds the tables too: hybrid is the default.
    assert header["tables"] >= 3 and header["methods"] == ["bm25", "dense", "hybrid"], header
    assert header["default_method"] == "hybrid" and header["dense"]["bundled"] is True, header


def _check_search(cwd, args, result):
    # The README's question names its table: the pylons table comes first.
    assert result.stdout.splitlines()[1].split()[2] == "aerial_lift_pylons.csv", result.stdout


CHECKS: Dict[str, Callable] = {
    "sample-data": _check_sample_data, "create-data": _check_create_data, "train": _check_train,
    "predict-and-evaluate": _check_predict_and_evaluate, "export": _check_export,
    "make-statements": _check_make_statements, "verify": _check_verify, "import": _check_model_dir,
    "init-from-bert": _check_model_dir, "create-pretrain-data": _check_create_pretrain_data,
    "collect-tables": _check_collect_tables, "evaluate": _check_evaluate, "ask": _check_ask,
    "index": _check_index, "search": _check_search,
}


def _downloads(cwd: str) -> None:
    """What a user would have downloaded, at the paths the lines name; and the checkout's tables."""
    import pathlib

    write_tabfact_release(pathlib.Path(cwd) / "path" / "to" / "tabfact")
    shutil.copytree(HF_FIXTURE, os.path.join(cwd, "path", "to", "tapas-base-finetuned-wtq"))
    for number, title in ((1, "Lions season"), (2, _title_of_a_test_table())):
        os.makedirs(os.path.join(cwd, "wtq_pages", "200-page"), exist_ok=True)
        with gzip.open(os.path.join(cwd, "wtq_pages", "200-page", f"{number}.html.gz"), "wt") as f:
            f.write(PAGE.format(id=number, title=title))
        with open(os.path.join(cwd, "wtq_pages", "200-page", f"{number}.json"), "w") as f:
            json.dump({"title": title, "url": f"http://en.wikipedia.org/wiki/{title.replace(' ', '_')}",
                       "id": number, "revision": 1, "hashcode": "x", "tableIndex": 0}, f)
    os.makedirs(os.path.join(cwd, "tapas_tf", "data"))
    os.symlink(os.path.join(ROOT, "tapas_tf", "data", "example_tables"),
               os.path.join(cwd, "tapas_tf", "data", "example_tables"))
    with open(os.path.join(cwd, "cities.csv"), "w") as f:  # COMMANDS.md's own table.
        f.write("City,Population\nOslo,709000\nBergen,291000\n")


def _title_of_a_test_table() -> str:
    """A page title whose table the pre-training job's split sends to test (so `evaluate` has examples)."""
    from tapas_tf.features.pretrain_config import split_of

    return next(title for title in (f"Team {i} season" for i in range(1, 10_000))
                if split_of(f"http://en.wikipedia.org/wiki/{title.replace(' ', '_')}_0", 0.01) == "test")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_serve(cwd: str, args: List[str]) -> None:
    """Starts `serve` on a free port, fetches its page, stops it."""
    port = _free_port()
    args = [a for a in args if not a.startswith("--port=")] + [f"--port={port}"]
    process = subprocess.Popen([*TAPAS_TF, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    assert response.status == 200 and "<html" in response.read().decode().lower()
                    return
            except OSError:
                assert process.poll() is None, process.communicate()[1][-2000:]
                assert time.time() < deadline, "serve did not answer in 120 s"
                time.sleep(0.5)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _run_lines(lines: List[str], cwd: str) -> None:
    for line in lines:
        args = shlex.split(line)[1:]
        name = args[0]
        if name == "serve":
            _run_serve(cwd, args)
            continue
        if name == "train":
            args += TINY_TRAINING
        result = subprocess.run([*TAPAS_TF, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{line}\n{result.stderr[-3000:]}"
        assert name in CHECKS, f"no check of what `{line}` does: add one to CHECKS"
        CHECKS[name](cwd, args, result)


def test_lines_are_read_from_the_pages():
    readme = documented_command_lines("README.md")
    assert readme[0].startswith("tapas-tf ask --table=tapas_tf/data/example_tables/aerial_lift_pylons.csv")
    assert any(line.startswith("tapas-tf collect-tables --interactions=") and "--output=" in line
               for line in readme)
    assert not any("#" in line for line in readme)


def test_every_readme_command_line_runs_as_written(tmp_path):
    _downloads(str(tmp_path))
    _run_lines(documented_command_lines("README.md"), str(tmp_path))


def test_every_commands_page_line_runs_as_written(tmp_path):
    _downloads(str(tmp_path))
    _run_lines(documented_command_lines(os.path.join("docs", "COMMANDS.md")), str(tmp_path))
