"""Speed and memory of the pre-training data job's extraction on a real Wikipedia dump sample.

Builds, from a `pages-articles` sample, multistream dumps with its pages repeated 1x and 10x
(100 pages per bz2 stream, with the index, as Wikipedia ships them), then runs
`tapas-tf create-pretrain-data --stage=extract` on each in a fresh process, with 1 and 2
DirectRunner worker processes, and reports wall time, articles/s per worker, tables/s, and the
peak RSS of the whole process tree (sampled every 50 ms with psutil).

    python benchmarks/pretrain_data_bench.py \\
        --dump=../shared/datasets/wikipedia/enwiki-sample-pages-articles.xml.bz2 --work_dir=/tmp/ptbench

Targets (issue 15): peak memory at 10x within 1.2x of 1x; speed-up from 1 to 2 workers >= 1.8x;
at least 20 articles/s per worker.
"""

import argparse
import bz2
import json
import os
import re
import sys
from typing import Dict, List

from machine import machine_line  # benchmarks/machine.py
from peak_memory import run_with_peak_rss  # benchmarks/peak_memory.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES_PER_STREAM = 100


def read_sample(path: str):
    """(header, list of <page> elements as text, footer) of a dump file."""
    text = bz2.open(path, "rt", encoding="utf-8").read()
    first = text.index("<page>")
    last = text.rindex("</page>") + len("</page>")
    pages = re.findall(r"<page>.*?</page>", text[first:last], flags=re.S)
    return text[:first], pages, text[last:]


def write_multistream(path: str, header: str, pages: List[str], footer: str) -> None:
    """A multistream dump of `pages` (ids renumbered so that every page is distinct) and its index."""
    index_lines = []
    with open(path, "wb") as out:
        out.write(bz2.compress(header.encode("utf-8")))
        for start in range(0, len(pages), PAGES_PER_STREAM):
            offset = out.tell()
            group = []
            for number, page in enumerate(pages[start:start + PAGES_PER_STREAM], start):
                page = re.sub(r"<id>\d+</id>", f"<id>{number + 1}</id>", page, count=1)
                group.append("  " + page + "\n")
                title = re.search(r"<title>(.*?)</title>", page, flags=re.S).group(1)
                index_lines.append(f"{offset}:{number + 1}:{title}\n")
            out.write(bz2.compress("".join(group).encode("utf-8")))
        out.write(bz2.compress(footer.encode("utf-8")))
    with open(path[:-len(".xml.bz2")] + "-index.txt.bz2", "wb") as index:
        index.write(bz2.compress("".join(index_lines).encode("utf-8")))


def run_job(dump: str, out_dir: str, workers: int) -> Dict[str, object]:
    command = [sys.executable, "-m", "tapas_tf.commands.dispatch", "create-pretrain-data", "--stage=extract",
               f"--input_dumps={dump}", f"--output_dir={out_dir}", "--streams_per_range=1",
               f"--direct_num_workers={workers}"]
    if workers > 1:
        command.append("--direct_running_mode=multi_processing")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    seconds, peak = run_with_peak_rss(command, env)
    counters = json.load(open(os.path.join(out_dir, "pretrain_report.json")))["counters"]
    articles = counters.get("pages_read", 0) - sum(v for k, v in counters.items() if k.startswith("pages_skipped_"))
    tables = sum(v for k, v in counters.items() if k.startswith("tables_extracted_"))
    return {"workers": workers, "seconds": round(seconds, 2), "peak_rss_mb": round(peak / 2**20, 1),
            "pages": counters.get("pages_read", 0), "articles": articles, "tables": tables,
            "articles_per_s_per_worker": round(articles / seconds / workers, 1),
            "tables_per_s": round(tables / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--json_out", default=None)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    header, pages, footer = read_sample(args.dump)
    results = []
    for scale in (int(s) for s in args.scales.split(",")):
        dump = os.path.join(args.work_dir, f"sample{scale}x-pages-articles-multistream.xml.bz2")
        write_multistream(dump, header, pages * scale, footer)
        for workers in (int(w) for w in args.workers.split(",")):
            result = {"scale": scale, **run_job(dump, os.path.join(args.work_dir, f"out{scale}x_{workers}w"), workers)}
            print(json.dumps(result), flush=True)
            results.append(result)
    summary = {"machine": machine_line(), "sample_pages": len(pages), "results": results}
    by = {(r["scale"], r["workers"]): r for r in results}
    if (1, 1) in by and (10, 1) in by:
        summary["memory_10x_over_1x"] = round(by[(10, 1)]["peak_rss_mb"] / by[(1, 1)]["peak_rss_mb"], 3)
    if (10, 1) in by and (10, 2) in by:
        summary["speedup_1_to_2_workers_10x"] = round(by[(10, 1)]["seconds"] / by[(10, 2)]["seconds"], 2)
    print(json.dumps(summary, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
