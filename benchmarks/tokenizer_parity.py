"""The package's tokenizer (Hugging Face `tokenizers`) against BERT's reference, on real text.

    python benchmarks/tokenizer_parity.py --sqa_dir=../shared/datasets/sqa --wtq_dir=../shared/datasets/wtq

Tokenises every question and every cell of every table of the SQA and WikiTableQuestions releases
with `tapas_tf.features.tokenization.TapasTokenizer` and with the pure-Python reference
(`tests/features/bert_reference_tokenization.py`, the tokeniser tapas-tf had before), over the
default vocabulary, and reports how many strings differ (with examples), how many are not ASCII,
and the strings per second of each. Exit code 1 if any string differs.
"""

import argparse
import csv
import glob
import importlib.util
import json
import os
import sys
import time

from tapas_tf.features.tokenization import TapasTokenizer
from tapas_tf.features.vocab import load_vocab, resolve_vocab_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "tests", "features", "bert_reference_tokenization.py")


def _reference():
    spec = importlib.util.spec_from_file_location("bert_reference_tokenization", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _csv_cells(path: str):
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for row in csv.reader(f, escapechar="\\"):
            yield from row


def _texts(sqa_dir: str, wtq_dir: str):
    """(source, text) of every question and cell, each distinct text once per source."""
    seen = set()
    csv.field_size_limit(sys.maxsize)
    for source, pattern in (("sqa questions", os.path.join(sqa_dir, "*.tsv")),
                            ("wtq questions", os.path.join(wtq_dir, "data", "*.tsv")),
                            ("wtq questions", os.path.join(wtq_dir, "*.tsv"))):
        for path in sorted(glob.glob(pattern)):
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
                for row in reader:
                    text = row.get("question") or row.get("utterance")
                    if text and (source, text) not in seen:
                        seen.add((source, text))
                        yield source, text
    for source, pattern in (("sqa cells", os.path.join(sqa_dir, "table_csv", "*.csv")),
                            ("wtq cells", os.path.join(wtq_dir, "csv", "*", "*.csv"))):
        for path in sorted(glob.glob(pattern)):
            for text in _csv_cells(path):
                if (source, text) not in seen:
                    seen.add((source, text))
                    yield source, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqa_dir", required=True)
    parser.add_argument("--wtq_dir", required=True)
    parser.add_argument("--vocab_file", default=None, help="Default BERT's uncased vocabulary with [EMPTY].")
    parser.add_argument("--output", default=None, help="Write the summary JSON here too.")
    args = parser.parse_args()
    vocab_file = resolve_vocab_file(args.vocab_file)
    texts = list(_texts(args.sqa_dir, args.wtq_dir))
    strings = [text for _, text in texts]
    tokenizer = TapasTokenizer(vocab_file)
    start = time.perf_counter()
    ours = tokenizer.tokenize_batch(strings)
    ours_seconds = time.perf_counter() - start
    reference, vocab = _reference(), set(load_vocab(vocab_file))
    start = time.perf_counter()
    theirs = [reference.reference_tokenize(text, vocab) for text in strings]
    reference_seconds = time.perf_counter() - start
    by_source: dict = {}
    differing = []
    for (source, text), a, b in zip(texts, ours, theirs):
        counts = by_source.setdefault(source, {"strings": 0, "non_ascii": 0, "differ": 0})
        counts["strings"] += 1
        counts["non_ascii"] += not text.isascii()
        if a != b:
            counts["differ"] += 1
            differing.append({"source": source, "text": text, "tokenizers": a, "reference": b})
    summary = {"strings": len(strings), "differ": len(differing), "by_source": by_source,
               "tokenizers_strings_per_second": round(len(strings) / ours_seconds),
               "reference_strings_per_second": round(len(strings) / reference_seconds),
               "examples": differing[:20]}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, ensure_ascii=False)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
