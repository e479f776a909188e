"""Table extraction from rendered Wikipedia pages, over a whole crawl: speed, counts, memory.

Reads every `*/N.html.gz` (or `N.html`) under `--pages_dir` in one process with
`tapas_tf.wikipedia.html_tables`, and prints one JSON object: pages/s, wikitables and infoboxes
found, tables extracted by kind, rejections by reason, page errors, peak RSS. With `--wtq_dir`, it
also compares each extracted WTQ table (the wikitable with the WTQ alias) with WTQ's own table:
exact (same header and cells), exact but for whitespace inside lines, same shape (same number of
rows and columns), or different.

    python benchmarks/html_tables_corpus.py --pages_dir=../shared/datasets/wikipedia/wtq_pages \
        --wtq_dir=../shared/datasets/wtq
"""

import argparse
import collections
import glob
import json
import os
import resource
import time
from typing import Dict, List, Optional


from tapas_tf.data.readers import wtq  # noqa: E402
from tapas_tf.wikipedia import html_tables  # noqa: E402


def table_texts(table) -> List[List[str]]:
    """Header and rows of a Table proto as lists of strings."""
    return [[cell.text for cell in table.columns]] + [[cell.text for cell in row.cells] for row in table.rows]


def wtq_texts(wtq_dir: str, alias: str) -> List[List[str]]:
    """A WTQ table (read from the `.tsv` twin of `csv/2xx-csv/N.csv`, as the WTQ reader does)."""
    return table_texts(wtq.read_wtq_table(wtq_dir, alias))


def _spaced(rows: List[List[str]]) -> List[List[str]]:
    """Cells with the whitespace of each line collapsed (WTQ keeps "a\n b" and "7  <7>")."""
    return [["\n".join(" ".join(line.split()) for line in cell.split("\n")) for cell in row] for row in rows]


def compare(ours: List[List[str]], theirs: List[List[str]]) -> str:
    """"exact"; "exact_but_spaces"; "same_shape" (rows and columns agree, some texts differ);
    or "different"."""
    if ours == theirs:
        return "exact"
    if _spaced(ours) == _spaced(theirs):
        return "exact_but_spaces"
    if len(ours) == len(theirs) and all(len(a) == len(b) for a, b in zip(ours, theirs, strict=True)):
        return "same_shape"
    return "different"


def run(pages_dir: str, wtq_dir: Optional[str]) -> Dict:
    paths = sorted(glob.glob(os.path.join(pages_dir, "*", "*.html.gz")) +
                   glob.glob(os.path.join(pages_dir, "*", "*.html")))
    found = collections.Counter()
    extracted = collections.Counter()
    rejected = collections.Counter()
    page_errors = collections.Counter()
    infobox_pages = 0
    comparisons = collections.Counter()
    start = time.perf_counter()
    for path in paths:
        try:
            page = html_tables.read_page(path)
        except html_tables.PageError as error:
            page_errors[error.reason] += 1
            continue
        tables, rejections = html_tables.extract_html(page)
        kinds = collections.Counter(t.kind for t in tables) + collections.Counter(r.kind for r in rejections)
        found.update(kinds)
        infobox_pages += kinds["infobox"] > 0
        extracted.update(t.kind for t in tables)
        rejected.update(f"{r.kind}.{r.reason}" for r in rejections)
        for table in tables:
            for alias in table.aliases:
                if wtq_dir:
                    comparisons[compare(table_texts(table.table), wtq_texts(wtq_dir, alias))] += 1
    seconds = time.perf_counter() - start
    report = {
        "pages": len(paths), "seconds": round(seconds, 1), "pages_per_second": round(len(paths) / seconds, 1),
        "found": dict(found), "pages_with_infobox": infobox_pages, "extracted": dict(extracted),
        "rejected": dict(sorted(rejected.items())), "page_errors": dict(page_errors),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if wtq_dir:
        report["wtq_tables_vs_csv"] = dict(comparisons)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages_dir", required=True, help="folder of 2xx-page/ folders")
    parser.add_argument("--wtq_dir", default=None, help="WTQ release folder (holds csv/) to compare with")
    args = parser.parse_args()
    print(json.dumps(run(args.pages_dir, args.wtq_dir), indent=1))


if __name__ == "__main__":
    main()
