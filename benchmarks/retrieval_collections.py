"""The retrieval benchmarks' collections and queries, written from the released data sets.

    .venv/bin/python benchmarks/retrieval_collections.py --datasets=../shared/datasets --output_dir=/tmp/retrieval

Writes, for `tapas-tf index` and `tapas-tf evaluate-retrieval`:

- `wtq/titles.tsv`: each of WikiTableQuestions' 2,108 tables (`csv/2xx-csv/N.csv`) with the title of
  the Wikipedia page it comes from (`wikipedia/wtq_pages/2xx-page/N.json`);
  `wtq/dev_queries.tsv`: the questions of `random-split-1-dev.tsv` (id, question, table_id), and
  `wtq/train_queries.tsv` those of `random-split-1-train.tsv` (for training a retriever). Index
  the release's own folder: `tapas-tf index --tables=DATASETS/wtq --patterns='csv/*.csv'
  --titles=OUT/wtq/titles.tsv` (each table also has a `.tsv` twin, hence the pattern).
- `tabfact/tables/`: TabFact's 16,573 `all_csv` tables as comma-separated files (the release
  separates cells with `#`), ids `N-N-N.html.csv` as in the release; `tabfact/titles.tsv`: the
  caption (the table's Wikipedia page title) of every table that `train_examples.json` or
  `val_examples.json` gives one; `tabfact/val_queries.tsv`: every val statement (id
  `TABLE#i`, question = the statement, table_id); `tabfact/train_queries.tsv` the same for train. Only the tables of train and val have captions
  in the files we have, so a val table always has one and 7,687 other tables never do; that makes
  the task easier than with every caption; index without `--titles` to measure without captions.

Every table or query left out is counted and printed, with the reason.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import Counter


def _write_tsv(path: str, header: list[str], rows: list[list[str]]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def wtq(datasets: str, out: str) -> Counter:
    counts: Counter = Counter()
    wtq_dir = os.path.join(datasets, "wtq")
    pages = os.path.join(datasets, "wikipedia", "wtq_pages")
    titles = []
    for group in sorted(os.listdir(os.path.join(wtq_dir, "csv"))):
        for name in sorted(os.listdir(os.path.join(wtq_dir, "csv", group))):
            if not name.endswith(".csv"):
                continue
            table_id = f"csv/{group}/{name}"
            page = os.path.join(pages, group.replace("-csv", "-page"), name[:-len(".csv")] + ".json")
            try:
                with open(page, encoding="utf-8") as f:
                    titles.append([table_id, _one_line(json.load(f)["title"])])
                counts["wtq_tables_titled"] += 1
            except (OSError, KeyError, json.JSONDecodeError):
                counts["wtq_tables_without_page_title"] += 1
    _write_tsv(os.path.join(out, "wtq", "titles.tsv"), ["table_id", "title"], titles)
    for split in ("dev", "train"):
        queries = []
        with open(os.path.join(wtq_dir, f"random-split-1-{split}.tsv"), encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                queries.append([row["id"], _one_line(row["utterance"]), row["context"]])
        counts[f"wtq_{split}_queries"] = len(queries)
        _write_tsv(os.path.join(out, "wtq", f"{split}_queries.tsv"), ["id", "question", "table_id"], queries)
    return counts


def tabfact(datasets: str, out: str) -> Counter:
    counts: Counter = Counter()
    tabfact_dir = os.path.join(datasets, "tabfact")
    tables_out = os.path.join(out, "tabfact", "tables")
    os.makedirs(tables_out, exist_ok=True)
    for name in sorted(os.listdir(os.path.join(tabfact_dir, "all_csv"))):
        with open(os.path.join(tabfact_dir, "all_csv", name), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("#") for line in f if line.strip()]
        if len(rows) < 2:
            counts["tabfact_tables_without_rows"] += 1
            continue
        with open(os.path.join(tables_out, name), "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        counts["tabfact_tables"] += 1
    titles: dict[str, str] = {}
    queries: dict[str, list] = {"train": [], "val": []}
    for split in ("train", "val"):
        with open(os.path.join(tabfact_dir, f"{split}_examples.json"), encoding="utf-8") as f:
            examples = json.load(f)
        for table_id, (statements, _, caption) in examples.items():
            titles[table_id] = _one_line(caption)
            queries[split].extend([f"{table_id}#{i}", _one_line(s), table_id] for i, s in enumerate(statements))
    _write_tsv(os.path.join(out, "tabfact", "titles.tsv"), ["table_id", "title"], sorted(titles.items()))
    for split, rows in queries.items():
        _write_tsv(os.path.join(out, "tabfact", f"{split}_queries.tsv"), ["id", "question", "table_id"], rows)
        counts[f"tabfact_{split}_queries"] = len(rows)
    counts["tabfact_captions"] = len(titles)
    return counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="../shared/datasets")
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args(argv)
    counts = wtq(args.datasets, args.output_dir) + tabfact(args.datasets, args.output_dir)
    print(json.dumps(dict(sorted(counts.items())), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
