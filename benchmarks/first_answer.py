"""Time to the first answer: a fresh process, a CSV table and one question, to the printed answer.

    python benchmarks/first_answer.py --repetitions 7 --json_out first_answer.json

What a new user runs, each in a new process, against Hugging Face's pipeline, in one run:

    ours, LiteRT:      python -m tapas_tf.ask --model_dir=OURS --table=T.csv "QUESTION"    # auto picks LiteRT
    ours, TensorFlow:  python -m tapas_tf.ask --model_dir=OURS --table=T.csv --backend=tensorflow "QUESTION"
    HF:                pipe = pipeline("table-question-answering", model=HF_DIR)       (peer interpreter)
                       print(pipe(table=pd.read_csv(T.csv, dtype=str, keep_default_na=False), query=QUESTION))

Models: the tiny random TAPAS of `ask_latency.py` (hidden 128, 2 layers; WTQ heads), built by HF
(`hf_ask_latency.py save`) and imported into a tapas-tf model directory, so both sides answer with
the same weights; our directory also gets its LiteRT copy (`lite_export.export_lite_model`). They are
kept in --work_dir and reused.

Each repetition runs the sides in turn (the order rotates every repetition, so that no side always
follows another); a side's process is timed from its start to the moment its answer line appears on
stdout (`to_answer_s`) and to its exit (`to_exit_s`), and its peak resident memory is the kernel's
(`os.wait4`'s ru_maxrss of that process). The report gives each side's median, and ours / HF.

Other processes distort wall times: the CPU they used during each side's run (all busy CPU minus this
process and its children) is recorded per run, and its median reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from ask_latency import OtherCpu  # noqa: E402  (benchmarks/ask_latency.py)
from machine import machine, machine_line  # noqa: E402  (benchmarks/machine.py)

TABLE = os.path.join(ROOT, "tapas_tf", "data", "example_tables", "aerial_lift_pylons.csv")
QUESTION = "which pylon is the tallest?"
ANSWER_PREFIX = "A: "

# What a user of Hugging Face writes, in the peer interpreter: argv = model_dir, csv, question.
HF_SCRIPT = """
import sys
import pandas as pd
from transformers import pipeline

model_dir, csv_path, question = sys.argv[1:4]
pipe = pipeline("table-question-answering", model=model_dir)
table = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
print("A: " + pipe(table=table, query=question)["answer"], flush=True)
"""


def side_commands(args: argparse.Namespace, dirs: Dict[str, str]) -> Dict[str, List[str]]:
    ask = [sys.executable, "-m", "tapas_tf.ask", f"--model_dir={dirs['ours']}", f"--table={args.table}"]
    return {"ours_lite": ask + [args.question],
            "ours_tensorflow": ask + ["--backend=tensorflow", args.question],
            "hf_pipeline": [args.peer_python, "-c", HF_SCRIPT, dirs["hf"], args.table, args.question]}


# Runs one command and reports on it as JSON. It runs in a small interpreter of its own: Linux gives
# a process the peak RSS of the process it was forked from when that was higher (exec keeps the
# old memory's high-water mark), so a child of this benchmark, which holds TensorFlow, would report
# this benchmark's peak instead of its own. argv = JSON [command, cwd, answer prefix].
LAUNCHER = """
import json, os, subprocess, sys, tempfile, time
command, cwd, prefix = json.loads(sys.argv[1])
start = time.perf_counter()
to_answer = answer = answered_by = None
with tempfile.TemporaryFile("w+") as errors:  # A file, not a pipe: a chatty stderr cannot block the child.
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=errors, text=True)
    for line in process.stdout:
        if to_answer is None and line.startswith(prefix):
            to_answer, answer = time.perf_counter() - start, line[len(prefix):].strip()
        if line.strip().startswith("answered by:"):
            answered_by = line.split(":", 1)[1].strip()
    _, status, usage = os.wait4(process.pid, 0)  # This child's own rusage.
    to_exit = time.perf_counter() - start
    errors.seek(0)
    stderr = errors.read()
print(json.dumps(dict(to_answer_s=to_answer, to_exit_s=to_exit, peak_rss_mb=usage.ru_maxrss / 1024,
                      returncode=os.waitstatus_to_exitcode(status), answer=answer, answered_by=answered_by,
                      stderr_tail=stderr[-500:])))
"""


def run_once(command: Sequence[str]) -> dict:
    """Runs `command` in a fresh process: seconds to the answer line and to exit, peak RSS, output."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    other = OtherCpu().start()
    launched = subprocess.run([sys.executable, "-I", "-S", "-c", LAUNCHER, json.dumps([list(command), ROOT,
                                                                                       ANSWER_PREFIX])],
                              env=env, capture_output=True, text=True, check=True)
    result = json.loads(launched.stdout)
    for key in ("to_answer_s", "to_exit_s", "peak_rss_mb"):
        result[key] = None if result[key] is None else round(result[key], 3 if key != "peak_rss_mb" else 1)
    result["other_cores"] = other.stop()
    if result["returncode"] == 0:
        result["stderr_tail"] = ""
    return result


def prepare_models(args: argparse.Namespace) -> Dict[str, str]:
    """HF's tiny random model and our import of it, with its LiteRT copy (reused when present)."""
    from ask_latency import prepare_models as prepare  # noqa: E402  (imports our package lazily)

    from tapas_tf.features.vocab import resolve_vocab_file
    from tapas_tf.qa import lite_model

    namespace = argparse.Namespace(work_dir=args.work_dir, seed=args.seed, weights="shared",
                                   peer_python=args.peer_python)
    dirs = prepare("tiny", namespace, resolve_vocab_file(None))
    try:
        lite_model.read_current_lite_model(dirs["ours"])
    except lite_model.LiteModelError:
        from tapas_tf.serving.lite_export import export_lite_model

        export_lite_model(dirs["ours"])
    return dirs


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def _paired_ratio(ours: List[dict], theirs: List[dict], key: str) -> Optional[float]:
    """Median over repetitions of ours / HF within the repetition: the runs of one repetition are
    minutes apart at most, so they share the machine's load, which medians per side do not."""
    return _median([a[key] / b[key] for a, b in zip(ours, theirs) if a[key] and b[key]])


def summarise(runs: Dict[str, List[dict]]) -> Dict[str, dict]:
    hf = runs.get("hf_pipeline", [])
    return {side: dict(median_to_answer_s=_median([r["to_answer_s"] for r in results]),
                       paired_time_ratio_to_hf=_paired_ratio(results, hf, "to_answer_s"),
                       paired_rss_ratio_to_hf=_paired_ratio(results, hf, "peak_rss_mb"),
                       median_to_exit_s=_median([r["to_exit_s"] for r in results]),
                       median_peak_rss_mb=_median([r["peak_rss_mb"] for r in results]),
                       min_to_answer_s=min((r["to_answer_s"] for r in results if r["to_answer_s"]), default=None),
                       median_other_cores=_median([r["other_cores"] for r in results]),
                       failures=sum(1 for r in results if r["returncode"] != 0 or r["to_answer_s"] is None),
                       answers=sorted({r["answer"] for r in results if r["answer"]}),
                       answered_by=sorted({r["answered_by"] for r in results if r["answered_by"]}))
            for side, results in runs.items()}


def markdown(report: dict) -> str:
    summary = report["summary"]
    lines = [f"Machine: {machine_line(report['machine'])}", "",
             f"Fresh process, `{os.path.basename(report['table'])}`, \"{report['question']}\"; "
             f"median of {report['repetitions']} runs per side; / HF: the median of the ratios within each "
             "repetition; other cores: CPU other processes used meanwhile (of "
             f"{report['machine']['cpu_count']}).", "",
             "| side | to the answer (s) | fastest (s) | to exit (s) | peak RSS (MB) | / HF time | / HF RSS "
             "| other cores |",
             "|---|---|---|---|---|---|---|---|"]
    for side, s in summary.items():
        lines.append(f"| {side} | {s['median_to_answer_s']} | {s['min_to_answer_s']} | {s['median_to_exit_s']} | "
                     f"{s['median_peak_rss_mb']} | {_times(s['paired_time_ratio_to_hf'])} | "
                     f"{_times(s['paired_rss_ratio_to_hf'])} | {s['median_other_cores']} |")
    return "\n".join(lines)


def _times(ratio: Optional[float]) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--table", default=TABLE)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--peer_python", default=os.path.join(ROOT, ".peer-env", "bin", "python"))
    parser.add_argument("--work_dir", default="/tmp/ask_latency", help="model directories (shared with ask_latency)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", default="ours_lite,ours_tensorflow,hf_pipeline")
    parser.add_argument("--json_out", default=None)
    args = parser.parse_args(argv)
    if not os.path.exists(args.peer_python):
        raise SystemExit(f"no peer interpreter at {args.peer_python}: run `bash benchmarks/setup_peer_env.sh`")
    dirs = prepare_models(args)
    commands = {side: command for side, command in side_commands(args, dirs).items()
                if side in args.sides.split(",")}
    sides = list(commands)
    runs: Dict[str, List[dict]] = {side: [] for side in sides}
    for repetition in range(args.repetitions):
        order = sides[repetition % len(sides):] + sides[:repetition % len(sides)]
        for side in order:
            result = run_once(commands[side])
            runs[side].append(result)
            print(f"# {repetition + 1}/{args.repetitions} {side}: {result['to_answer_s']} s, "
                  f"{result['peak_rss_mb']} MB, other cores {result['other_cores']}"
                  + (f", FAILED: {result['stderr_tail']}" if result["returncode"] else ""), file=sys.stderr,
                  flush=True)
    wrong = {r["answered_by"] for r in runs.get("ours_lite", []) if not (r["answered_by"] or "").endswith("(LiteRT)")}
    if wrong:
        raise SystemExit(f"ours_lite was not answered by LiteRT: {sorted(map(str, wrong))}")
    report = dict(machine=machine(), table=args.table, question=args.question, repetitions=args.repetitions,
                  commands={side: " ".join(c if " " not in c else repr(c) for c in command[:6])
                            for side, command in commands.items()},
                  model_dirs=dirs, summary=summarise(runs), runs=runs)
    print(markdown(report))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
