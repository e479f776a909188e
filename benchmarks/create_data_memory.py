"""Peak memory of `create_data` as its input grows: a task's data job must stream.

Builds, from WikiTableQuestions' `random-split-1-train.tsv`, training files of its first
`--questions` questions repeated 1x and 10x (each copy with ids of its own, so that every line is
a question to convert; the dev file is its first 20 questions at every scale), then runs `tapas-tf create-data --task=WTQ` on each in a fresh
process and reports wall time, questions/s and the peak RSS of the whole process tree (sampled
every 50 ms with psutil). Every interaction carries a copy of its table, so a job that holds its
output in memory grows by the table size per question.

    python benchmarks/create_data_memory.py --wtq_dir=../shared/datasets/wtq --work_dir=/tmp/cdmem

`--project_dir` runs another checkout's job (before and after a change, in the same run).
Target (issue 27): peak memory at 10x within 1.2x of 1x.
"""

import argparse
import json
import os
import sys
from typing import Dict

from machine import machine_line  # benchmarks/machine.py
from peak_memory import run_with_peak_rss  # benchmarks/peak_memory.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_FILE = "random-split-1-train.tsv"
DEV_FILE = "random-split-1-dev.tsv"
DEV_QUESTIONS = 20  # The job requires a dev file; a small one, the same at every scale.


def write_input(wtq_dir: str, input_dir: str, questions: int, scale: int) -> int:
    """A WTQ release folder whose train file holds the first `questions` questions `scale` times;
    returns the number of questions written."""
    os.makedirs(input_dir, exist_ok=True)
    tables = os.path.join(input_dir, "csv")
    if not os.path.exists(tables):
        os.symlink(os.path.abspath(os.path.join(wtq_dir, "csv")), tables)
    # Lines as they are (only the id, the first field, changes), so that the reader sees the
    # release's own quoting and escapes.
    with open(os.path.join(wtq_dir, TRAIN_FILE), encoding="utf-8") as f:
        header, *lines = f.read().splitlines()[:questions + 1]
    with open(os.path.join(input_dir, TRAIN_FILE), "w", encoding="utf-8") as f:
        f.write(header + "\n")
        for copy in range(scale):
            for line in lines:
                question_id, rest = line.split("\t", 1)
                f.write(f"{question_id}-c{copy}\t{rest}\n")
    with open(os.path.join(wtq_dir, DEV_FILE), encoding="utf-8") as f:
        dev_lines = f.read().splitlines()[:DEV_QUESTIONS + 1]
    with open(os.path.join(input_dir, DEV_FILE), "w", encoding="utf-8") as f:
        f.write("\n".join(dev_lines) + "\n")
    return len(lines) * scale


def run_job(project_dir: str, input_dir: str, out_dir: str) -> Dict[str, object]:
    command = [sys.executable, "-m", "tapas_tf.commands.dispatch", "create-data", "--task=WTQ",
               f"--input_dir={input_dir}", f"--output_dir={out_dir}", "--noprogress_bar"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": project_dir}
    seconds, peak = run_with_peak_rss(command, env)
    with open(os.path.join(out_dir, "conversion_report.json")) as f:
        split = json.load(f)["splits"]["train"]
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(peak / 2**20, 1),
            "questions_read": split["questions_read"], "examples_written": split["examples_written"],
            "output_mb": round(sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(out_dir)
                                   for n in names) / 2**20, 1),
            "questions_per_s": round(split["questions_read"] / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wtq_dir", required=True, help="the WTQ release (csv/ and random-split-1-train.tsv)")
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--project_dir", default=ROOT, help="the checkout whose job runs")
    parser.add_argument("--json_out", default=None)
    args = parser.parse_args()
    results = []
    for scale in (int(s) for s in args.scales.split(",")):
        input_dir = os.path.join(args.work_dir, f"in{scale}x")
        written = write_input(args.wtq_dir, input_dir, args.questions, scale)
        result = {"scale": scale, "questions": written,
                  **run_job(args.project_dir, input_dir, os.path.join(args.work_dir, f"out{scale}x"))}
        print(json.dumps(result), flush=True)
        results.append(result)
    summary = {"machine": machine_line(), "project_dir": os.path.abspath(args.project_dir), "results": results}
    by = {r["scale"]: r for r in results}
    if 1 in by and 10 in by:
        summary["memory_10x_over_1x"] = round(by[10]["peak_rss_mb"] / by[1]["peak_rss_mb"], 3)
    print(json.dumps(summary, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
