"""Writes the Hugging Face TabFact parity fixture under tests/fixtures/tabfact_hf/.

Runs in the peer environment (PyTorch + transformers, see benchmarks/README.md):

    PEER_ENV=/work/peer-env bash benchmarks/setup_peer_env.sh
    /work/peer-env/bin/python benchmarks/make_tabfact_fixture.py --output_dir tests/fixtures/tabfact_hf

It builds a tiny random `TapasForSequenceClassification` (hidden 32, 2 layers, 2 heads,
intermediate 64, 2 labels, the project's test vocabulary from tests/vocab_fixture.py), adds
Gaussian noise to every parameter (so a dropped, transposed or swapped tensor changes the
outputs), and saves it with transformers' own `save_pretrained` (safetensors) beside the
vocabulary, as a Hub repository holds it:

    config.json          transformers' TapasConfig (architectures: TapasForSequenceClassification)
    model.safetensors    HF parameter names (tapas.*, classifier.weight, classifier.bias)
    vocab.txt            the test vocabulary
    cases.json           per case: the table, the statement, what HF's TapasTokenizer makes of them
                         (input_ids, token_type_ids as 7 ids per token) and, in eval mode,
                         transformers' own logits and torch.softmax(logits, -1)[:, 1] = P(entailed);
                         a case with "known_difference" records where HF's tokenizer and the
                         original TAPAS encoding part (a cell of "": no token in HF, [EMPTY] in TAPAS)

Deterministic: fixed seeds, CPU, float32. A weight seed whose probabilities sit too near 0 or 1
(where a wrong tensor can hide), too near each other, or all on one side of 0.5 is skipped for the
next one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from typing import Optional

import numpy as np
import pandas as pd
import torch
import transformers
from transformers import TapasConfig, TapasForSequenceClassification, TapasTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tests.vocab_fixture import write_test_vocab  # noqa: E402  (pure Python, no TensorFlow)

LAYER_NORM_NOISE_STD = 0.5
CLASSIFIER_NOISE_STD = 0.5
OTHER_NOISE_STD = 0.1
MAX_SEED_TRIES = 100
# Every P(entailed) must lie in [MIN_P, 1 - MIN_P] and two cases must differ by MIN_GAP.
MIN_P = 0.05
MIN_GAP = 0.02

# Small hand-made tables: ASCII words of the test vocabulary, numbers so that column ranks and the
# statement's numeric relations to the cells matter, an empty cell.
CASES = [
    {
        "name": "cities",
        "table": {"city": ["paris", "london", "berlin"], "country": ["france", "england", "germany"],
                  "population": ["2100000", "8900000", "3600000"]},
        "statement": "london has more population than paris",
    },
    {
        "name": "players",
        "table": {"player": ["john smith", "mary", "smith"], "team": ["red", "blue", "red"],
                  "goals": ["12", "30", "7"], "points": ["4", "-", "9.5"]},
        "statement": "mary has the most goals with 30",
    },
    {
        "name": "seasons",
        "table": {"season": ["1998", "2004", "2010", "2016"],
                  "club": ["old town", "new town", "old town", "capital"],
                  "place": ["1", "3", "2", "1"], "medals": ["5", "12", "8", "12"]},
        "statement": "the club won 12 medals in 2004",
    },
    # Not a parity case: HF's TapasTokenizer gives a cell of "" no token at all, where the original
    # TAPAS code (which trained the released models) and tapas-tf give it [EMPTY], as HF does "-".
    {
        "name": "empty_string_cell",
        "table": {"player": ["john", "mary"], "goals": ["12", ""]},
        "statement": "john has more goals than mary",
        "known_difference": "HF gives the empty-string cell no token; TAPAS gives it [EMPTY]",
    },
]


def make_config(vocab_size: int) -> TapasConfig:
    return TapasConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_act="gelu",
        max_position_embeddings=512,
        num_labels=2,
        reset_position_index_per_cell=True,
    )


def build_model(config: TapasConfig, seed: int) -> TapasForSequenceClassification:
    """A random classifier with noise on every parameter, in eval mode."""
    torch.manual_seed(seed)
    model = TapasForSequenceClassification(config).eval()
    generator = torch.Generator().manual_seed(10_000 + seed)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            if "LayerNorm" in name:
                std = LAYER_NORM_NOISE_STD
            elif name.startswith("classifier."):
                std = CLASSIFIER_NOISE_STD
            else:
                std = OTHER_NOISE_STD
            parameter.add_(torch.randn(parameter.shape, generator=generator) * std)
    return model


def run_cases(model: TapasForSequenceClassification, tokenizer: TapasTokenizer) -> list[dict]:
    """HF's encoding and P(entailed) of every case, one statement at a time (no padding)."""
    results = []
    for case in CASES:
        table = pd.DataFrame(case["table"]).astype(str)
        encoded = tokenizer(table=table, queries=case["statement"], padding=False, truncation=False,
                            return_tensors="pt")
        with torch.no_grad():
            logits = model(**encoded).logits
            probability = torch.softmax(logits, -1)[:, 1]
        results.append({
            **case,
            "input_ids": encoded["input_ids"][0].tolist(),
            "token_type_ids": encoded["token_type_ids"][0].tolist(),
            "logits": [float(x) for x in logits[0]],
            "p_entailed": float(probability[0]),
        })
    return results


def well_spread(results: list[dict]) -> bool:
    probabilities = sorted(r["p_entailed"] for r in results if "known_difference" not in r)
    inside = all(MIN_P <= p <= 1 - MIN_P for p in probabilities)
    apart = all(b - a >= MIN_GAP for a, b in zip(probabilities, probabilities[1:]))
    both_verdicts = probabilities[0] < 0.5 - MIN_GAP and probabilities[-1] > 0.5 + MIN_GAP
    return inside and apart and both_verdicts


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default=os.path.join(ROOT, "tests", "fixtures", "tabfact_hf"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    os.makedirs(args.output_dir, exist_ok=True)
    vocab_file = write_test_vocab(os.path.join(args.output_dir, "vocab.txt"))
    tokenizer = TapasTokenizer(vocab_file)
    config = make_config(len(tokenizer.vocab))
    for seed in range(MAX_SEED_TRIES):
        model = build_model(config, seed)
        results = run_cases(model, tokenizer)
        if well_spread(results):
            break
    else:
        raise SystemExit(f"no weight seed in {MAX_SEED_TRIES} spreads the probabilities")
    for result in results:
        unknown = result["input_ids"].count(tokenizer.unk_token_id)
        if unknown:
            raise SystemExit(f"{result['name']}: {unknown} [UNK] tokens; use words of the test vocabulary")
    model.save_pretrained(args.output_dir, safe_serialization=True)
    summary = {
        "generated_by": "benchmarks/make_tabfact_fixture.py",
        "seed": seed,
        "noise_std": {"LayerNorm": LAYER_NORM_NOISE_STD, "classifier": CLASSIFIER_NOISE_STD,
                      "other": OTHER_NOISE_STD},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "token_type_order": ["segment_ids", "column_ids", "row_ids", "prev_label_ids", "column_ranks",
                             "inv_column_ranks", "numeric_relations"],
        "cases": results,
    }
    with open(os.path.join(args.output_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    sizes = {name: os.path.getsize(os.path.join(args.output_dir, name))
             for name in sorted(os.listdir(args.output_dir))}
    print(json.dumps({"seed": seed, "p_entailed": [round(r["p_entailed"], 6) for r in results],
                      "bytes": sizes}))


if __name__ == "__main__":
    main()
