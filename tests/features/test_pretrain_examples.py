"""Interactions -> masked-LM pre-training examples, checked on hand-drawn tables."""

import collections
import hashlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import make_table
from tapas_tf.features import example_features
from tapas_tf.features.classifier_examples import table_id_hash
from tapas_tf.features.pretrain_config import (
    PretrainConfig,
    PretrainSkip,
    SkipReason,
    example_seed,
    split_of,
)
from tapas_tf.features.pretrain_examples import PretrainExample, PretrainExampleMaker
from tapas_tf.features.tokenization import TapasTokenizer
from tests.vocab_fixture import write_test_vocab

NAN = math.nan
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# "hudson" is hud ##son and "seine" se ##ine; "main", "river" and "york" are single pieces.
EXTRA_WORDS = ["hud", "##son", "se", "##ine", "york", "river", "main"]

# | city name     | population | main river      |
# | new york city | 8          | hudson          |
# | paris         | 2          | the seine river |
HEADER = ["city name", "population", "main river"]
ROWS = [["new york city", "8", "hudson"], ["paris", "2", "the seine river"]]
LONG_TEXT = (
    "the seine is a river of france and the hudson is a river of new york state that has "
    "a main town and hundreds of small villages where players won gold silver and bronze medals "
    "in the first election of the district after the last game of the old league season"
)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    vocab = write_test_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", EXTRA_WORDS)
    return TapasTokenizer(vocab)


def _maker(tokenizer, **config) -> PretrainExampleMaker:
    return PretrainExampleMaker(PretrainConfig(vocab_file=tokenizer.vocab_file, **config), tokenizer)


def _interaction(header=HEADER, rows=ROWS, texts=(("TITLE", "hello world"),), table_id="t",
                 interaction_id="i") -> interaction_pb2.Interaction:
    interaction = interaction_pb2.Interaction(id=interaction_id)
    interaction.table.CopyFrom(make_table(table_id, list(header), [list(r) for r in rows]))
    for question_id, text in texts:
        interaction.questions.add(id=question_id, original_text=text)
    number_annotation.add_numeric_values(interaction)
    return interaction


def _examples(maker, interaction) -> list:
    results = list(maker.make(interaction))
    assert len(results) == maker.config.dupe_factor
    assert all(isinstance(r, PretrainExample) for r in results), results
    return results


def _original_ids(features) -> np.ndarray:
    """input_ids with the masked positions given back their original pieces."""
    ids = features["input_ids"].copy()
    real = features["masked_lm_weights"] > 0
    ids[features["masked_lm_positions"][real]] = features["masked_lm_ids"][real]
    return ids


def _tokens(tokenizer, features) -> list:
    length = int(features["input_mask"].sum())
    return tokenizer.convert_ids_to_tokens(_original_ids(features)[:length])


def _masked(features) -> list:
    real = features["masked_lm_weights"] > 0
    return features["masked_lm_positions"][real].tolist()


# --- layout ---------------------------------------------------------------------------------------


def test_layout_of_a_hand_checked_table(tokenizer):
    # Snippet "hello world" (2 pieces, shorter than the minimum: taken whole). Budget 18 - 4 = 14.
    # First words: city population main | new 8 hud ##son | paris 2 the = 10 pieces.
    # Second words, header then rows: name (11), river (12), york (13), se ##ine (15 > 14): stop.
    maker = _maker(tokenizer, max_seq_length=18, min_snippet_pieces=2, max_snippet_pieces=4, dupe_factor=3)
    for example in _examples(maker, _interaction()):
        f = example.features
        assert _tokens(tokenizer, f) == [
            "[CLS]", "hello", "world", "[SEP]",  # 0-3
            "city", "name", "population", "main", "river",  # 4-8 header
            "new", "york", "8", "hud", "##son",  # 9-13 row 1
            "paris", "2", "the"]  # 14-16 row 2
        q, pad = [0] * 4, [0]
        np.testing.assert_array_equal(f["input_mask"], [1] * 17 + pad)
        np.testing.assert_array_equal(f["segment_ids"], q + [1] * 13 + pad)
        np.testing.assert_array_equal(f["column_ids"], q + [1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 1, 2, 3] + pad)
        np.testing.assert_array_equal(f["row_ids"], q + [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2] + pad)
        # Population 8, 2: ranks 2, 1; inverse ranks 1, 2.
        np.testing.assert_array_equal(f["column_ranks"], q + [0] * 7 + [2, 0, 0, 0, 1, 0] + pad)
        np.testing.assert_array_equal(f["inv_column_ranks"], q + [0] * 7 + [1, 0, 0, 0, 2, 0] + pad)
        np.testing.assert_array_equal(f["prev_label_ids"], [0] * 18)
        np.testing.assert_array_equal(f["numeric_relations"], [0] * 18)
        np.testing.assert_array_equal(f["numeric_values"], [NAN] * 11 + [8.0, NAN, NAN, NAN, 2.0, NAN, NAN])
        np.testing.assert_array_equal(
            f["numeric_values_scale"], [1.0] * 4 + [2, 2, 1, 2, 2, 2, 2, 1, 2, 2, 1, 1, 1] + [1.0])
        assert f["next_sentence_labels"].tolist() == [0]
        assert f["table_id"] == "t" and f["table_id_hash"].tolist() == [table_id_hash("t")]
        # "new york city" and "the seine river" lost words.
        assert example.stats == {"rows_dropped": 0, "cells_trimmed": 2, "rank_cells_clamped": 0,
                                 "snippet_word_cut": 0}


@pytest.mark.parametrize("max_seq_length, table_tokens", [
    # Budget 10: the first word of every cell only.
    (14, "city population main new 8 hud ##son paris 2 the"),
    # Budget 12: second words of the header.
    (16, "city name population main river new 8 hud ##son paris 2 the"),
    # Budget 15: every second word; the third turn starts with "city" (16 > 15): stop.
    (19, "city name population main river new york 8 hud ##son paris 2 the se ##ine"),
    # Budget 17: everything.
    (21, "city name population main river new york city 8 hud ##son paris 2 the se ##ine river"),
])
def test_words_are_taken_turn_by_turn(tokenizer, max_seq_length, table_tokens):
    maker = _maker(tokenizer, max_seq_length=max_seq_length, min_snippet_pieces=2, max_snippet_pieces=4,
                   dupe_factor=1)
    [example] = _examples(maker, _interaction())
    assert _tokens(tokenizer, example.features)[4:] == table_tokens.split()


def test_rows_that_do_not_fit_leave_a_random_block_of_the_most_rows(tokenizer):
    # Rows "10 | paris" to "29 | paris": 3 pieces each ("10" is 1 ##0). Budget 30 - 4 = 26, header
    # 2: 24 for rows, so 8 consecutive rows of 20, starting anywhere from row 10 to row 22.
    rows = [[str(10 + i), "paris"] for i in range(20)]
    assert all(len(tokenizer.tokenize(r[0] + " " + r[1])) == 3 for r in rows)
    most = 8
    maker = _maker(tokenizer, max_seq_length=30, min_snippet_pieces=2, max_snippet_pieces=4, dupe_factor=10)
    starts = set()
    for example in _examples(maker, _interaction(["rank", "name"], rows)):
        f = example.features
        body = f["row_ids"] > 0
        kept = [int(v) for v in np.unique(f["numeric_values"][body & (f["column_ids"] == 1)])]
        assert kept == list(range(kept[0], kept[0] + most))  # Consecutive rows, as many as fit.
        assert int(f["input_mask"].sum()) == 30
        assert sorted(set(f["row_ids"][body].tolist())) == list(range(1, most + 1))
        assert example.stats["rows_dropped"] == 20 - most
        starts.add(kept[0])
    assert len(starts) > 1


# --- snippets -------------------------------------------------------------------------------------


def test_snippets_are_spans_of_whole_words_within_the_bounds(tokenizer):
    pieces = tokenizer.tokenize(LONG_TEXT)
    assert len(pieces) > 50 and any(p.startswith("##") for p in pieces)
    maker = _maker(tokenizer, dupe_factor=60)
    lengths, begins = set(), set()
    for example in _examples(maker, _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)])):
        tokens = _tokens(tokenizer, example.features)
        snippet = tokens[1:tokens.index("[SEP]")]
        assert 8 <= len(snippet) <= 16
        matches = [b for b in range(len(pieces) - len(snippet) + 1) if pieces[b:b + len(snippet)] == snippet]
        assert any(not pieces[b].startswith("##")
                   and (b + len(snippet) == len(pieces) or not pieces[b + len(snippet)].startswith("##"))
                   for b in matches), snippet
        lengths.add(len(snippet))
        begins.add(matches[0])
    assert len(lengths) > 3 and len(begins) > 10


def test_texts_long_enough_are_preferred_and_short_texts_are_taken_whole(tokenizer):
    maker = _maker(tokenizer, dupe_factor=20)
    texts = [("TITLE", "hello"), ("DESCRIPTION", LONG_TEXT), ("SEGMENT_TEXT", LONG_TEXT)]
    for example in _examples(maker, _interaction(texts=texts)):
        tokens = _tokens(tokenizer, example.features)
        snippet = tokens[1:tokens.index("[SEP]")]
        assert len(snippet) >= 8 and "hello" not in snippet
    short = _maker(tokenizer, dupe_factor=20)
    snippets = set()
    for example in _examples(short, _interaction(texts=[("TITLE", "hello world"), ("CAPTION", "paris"),
                                                        ("SEGMENT_TITLE", "")])):
        tokens = _tokens(tokenizer, example.features)
        snippets.add(" ".join(tokens[1:tokens.index("[SEP]")]))
    assert snippets == {"hello world", "paris"}


def test_a_single_word_longer_than_the_maximum_is_cut(tokenizer):
    word = "abcdefghijklmnopqrst"  # a ##b ##c ... : 20 pieces.
    maker = _maker(tokenizer, dupe_factor=2)
    for example in _examples(maker, _interaction(texts=[("TITLE", word)])):
        tokens = _tokens(tokenizer, example.features)
        assert tokens[1:tokens.index("[SEP]")] == tokenizer.tokenize(word)[:16]
        assert example.stats["snippet_word_cut"] == 1


# --- masking --------------------------------------------------------------------------------------


def _units(tokenizer, features, cells_whole: bool) -> list:
    """Positions of every masking unit: words of the snippet, and cells (or words of cells)."""
    units, previous_cell = [], None
    for position, token in enumerate(_tokens(tokenizer, features)):
        if token in ("[CLS]", "[SEP]"):
            previous_cell = None
            continue
        cell = (int(features["row_ids"][position]), int(features["column_ids"][position]))
        if features["segment_ids"][position] and cells_whole:
            new_unit = cell != previous_cell
        else:
            new_unit = cell != previous_cell or not token.startswith("##")
        if new_unit:
            units.append([])
        units[-1].append(position)
        previous_cell = cell
    return units


@pytest.mark.parametrize("always_continue_cells", [True, False])
def test_masking_covers_whole_words_and_cells(tokenizer, always_continue_cells):
    maker = _maker(tokenizer, max_seq_length=40, dupe_factor=40, masked_lm_prob=0.3,
                   always_continue_cells=always_continue_cells)
    texts = [("SEGMENT_TEXT", LONG_TEXT)]
    partly_masked_cells = 0
    for example in _examples(maker, _interaction(texts=texts)):
        f = example.features
        masked = set(_masked(f))
        assert masked
        for unit in _units(tokenizer, f, always_continue_cells):
            assert set(unit) <= masked or not set(unit) & masked, unit
        for unit in _units(tokenizer, f, True):
            if f["column_ids"][unit[0]] and 0 < len(set(unit) & masked) < len(unit):
                partly_masked_cells += 1
    # With whole-word masking in cells, "new york" can lose "york" alone.
    assert (partly_masked_cells > 0) == (not always_continue_cells)


def test_replacements_are_80_percent_mask_10_unchanged_10_random(tokenizer):
    maker = _maker(tokenizer, max_seq_length=40, dupe_factor=400, masked_lm_prob=0.3)
    counts = collections.Counter()
    specials = {tokenizer.convert_tokens_to_ids([t])[0]
                for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[EMPTY]")}
    for example in _examples(maker, _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)])):
        f = example.features
        for position, original in zip(_masked(f), f["masked_lm_ids"]):
            shown = int(f["input_ids"][position])
            if shown == tokenizer.mask_id:
                counts["mask"] += 1
            elif shown == original:
                counts["same"] += 1
            else:
                assert shown not in specials
                counts["random"] += 1
    total = sum(counts.values())
    assert total > 3000
    assert abs(counts["mask"] / total - 0.8) < 0.025
    assert abs(counts["same"] / total - 0.1) < 0.02
    assert abs(counts["random"] / total - 0.1) < 0.02


def test_number_of_predictions(tokenizer):
    # 13 tokens, every unit one piece: exactly round(0.15 * 13) = round(1.95) = 2 are masked.
    maker = _maker(tokenizer, max_seq_length=20, min_snippet_pieces=2, max_snippet_pieces=4, dupe_factor=10)
    rows = [["paris", "2", "london"], ["berlin", "4", "france"]]
    for example in _examples(maker, _interaction(["city", "rank", "name"], rows)):
        f = example.features
        assert int(f["input_mask"].sum()) == 13
        assert f["masked_lm_weights"].tolist() == [1.0] * 2 + [0.0] * 18
        assert f["masked_lm_positions"][2:].tolist() == [0] * 18
        assert f["masked_lm_positions"][:2].tolist() == sorted(f["masked_lm_positions"][:2].tolist())


def test_max_predictions_per_seq_is_respected_without_partial_units(tokenizer):
    maker = _maker(tokenizer, max_seq_length=40, dupe_factor=30, masked_lm_prob=1.0, max_predictions_per_seq=5)
    for example in _examples(maker, _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)])):
        f = example.features
        masked = set(_masked(f))
        assert 1 <= len(masked) <= 5 and f["masked_lm_weights"].shape == (5,)
        for unit in _units(tokenizer, f, True):
            assert set(unit) <= masked or not set(unit) & masked


# --- determinism ----------------------------------------------------------------------------------


def _digest(results) -> str:
    digest = hashlib.sha256()
    for result in results:
        for name in sorted(result.features):
            value = result.features[name]
            digest.update(name.encode() + (value.encode() if isinstance(value, str) else value.tobytes()))
    return digest.hexdigest()


def test_same_seed_same_examples_whatever_the_order(tokenizer):
    first, second = _interaction(), _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)], table_id="u")
    maker = _maker(tokenizer, max_seq_length=40)
    a = _digest(_examples(maker, first)), _digest(_examples(maker, second))
    again = _maker(tokenizer, max_seq_length=40)
    b = _digest(_examples(again, second)), _digest(_examples(again, first))
    assert a == b[::-1]
    # A different seed changes the examples; duplicates differ from each other.
    assert _digest(_examples(_maker(tokenizer, max_seq_length=40, random_seed=1), second)) != a[1]
    duplicates = [_digest([e]) for e in _examples(maker, second)]
    assert len(set(duplicates)) == len(duplicates)


def test_seeds_are_fingerprints_not_python_hashes():
    assert example_seed("t", 0, 12345) == example_seed("t", 0, 12345)
    assert example_seed("t", 0, 12345) == int.from_bytes(
        hashlib.sha256(b"pretrain\tt\t0\t12345").digest()[:8], "big")
    assert len({example_seed("t", d, 12345) for d in range(10)}) == 10


def test_examples_are_identical_in_another_process(tokenizer):
    """A fresh interpreter with another PYTHONHASHSEED (and the pure-Python tokenizer) agrees."""
    script = (
        "import sys\n"
        "from tests.features.test_pretrain_examples import _digest, _interaction, LONG_TEXT\n"
        "from tapas_tf.features.pretrain_config import PretrainConfig\n"
        "from tapas_tf.features.pretrain_examples import PretrainExampleMaker\n"
        "from tapas_tf.features.tokenization import TapasTokenizer\n"
        "maker = PretrainExampleMaker(PretrainConfig(vocab_file=sys.argv[1], max_seq_length=40),\n"
        "                             TapasTokenizer(sys.argv[1]))\n"
        "print(_digest(maker.make(_interaction(texts=[('SEGMENT_TEXT', LONG_TEXT)]))))\n")
    env = dict(os.environ, PYTHONHASHSEED="123", PYTHONPATH=ROOT)
    output = subprocess.run([sys.executable, "-c", script, tokenizer.vocab_file], env=env, cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    maker = _maker(tokenizer, max_seq_length=40)
    assert output == _digest(_examples(maker, _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)])))


# --- Table 5 metadata -----------------------------------------------------------------------------


def test_location_and_number_of_every_masked_position(tokenizer):
    # Everything is masked: 17 tokens, masked_lm_prob 1.0, 40 predictions allowed.
    maker = _maker(tokenizer, max_seq_length=20, min_snippet_pieces=6, max_snippet_pieces=8,
                   masked_lm_prob=1.0, max_predictions_per_seq=40, dupe_factor=2)
    interaction = _interaction(["name", "2010"], [["paris", "8"], ["london", "n/a"]],
                               texts=[("CAPTION", "hello 1988 world")])
    text, header, cell = 0, 1, 2
    for example in _examples(maker, interaction):
        f = example.features
        assert _tokens(tokenizer, f) == [
            "[CLS]", "hello", "1", "##9", "##8", "##8", "world", "[SEP]",
            "name", "2", "##0", "##1", "##0", "paris", "8", "london", "[EMPTY]"]
        expected = {
            1: (text, 0), 2: (text, 1), 3: (text, 1), 4: (text, 1), 5: (text, 1), 6: (text, 0),
            8: (header, 0), 9: (header, 1), 10: (header, 1), 11: (header, 1), 12: (header, 1),
            13: (cell, 0), 14: (cell, 1), 15: (cell, 0), 16: (cell, 0)}
        n = len(expected)
        assert f["masked_lm_positions"][:n].tolist() == sorted(expected)
        assert f["masked_lm_location"].tolist() == [expected[p][0] for p in sorted(expected)] + [0] * (40 - n)
        assert f["masked_lm_is_number"].tolist() == [expected[p][1] for p in sorted(expected)] + [0] * (40 - n)
        assert f["masked_lm_weights"].sum() == n


# --- skips ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("interaction, config, reason", [
    (_interaction(texts=[("TITLE", ""), ("CAPTION", " \n")]), {}, SkipReason.NO_TEXT),
    (_interaction(texts=[]), {}, SkipReason.NO_TEXT),
    (_interaction(rows=[]), {}, SkipReason.EMPTY_TABLE),
    (_interaction(header=[], rows=[]), {}, SkipReason.EMPTY_TABLE),
    (_interaction(table_id="", interaction_id=""), {}, SkipReason.MISSING_TABLE_ID),
    (_interaction([f"c{i}" for i in range(256)], [["x"] * 256]), {}, SkipReason.TOO_MANY_COLUMNS),
    # [CLS] hello world [SEP] leaves 4 pieces: 5 column names do not fit.
    (_interaction(list("abcde"), [list("abcde")]), {"max_seq_length": 8}, SkipReason.HEADER_TOO_LONG),
    # The header (2 pieces) fits in 4, but no row of 3 pieces fits beside it.
    (_interaction(["a", "b"], [["hudson", "seine"], ["b", "hudson"]]), {"max_seq_length": 8},
     SkipReason.NO_ROW_FITS),
])
def test_skips_with_reasons_for_every_duplicate(tokenizer, interaction, config, reason):
    config = {"min_snippet_pieces": 2, "max_snippet_pieces": 4, "dupe_factor": 3, **config}
    results = list(_maker(tokenizer, **config).make(interaction))
    assert [type(r) for r in results] == [PretrainSkip] * 3
    assert {r.reason for r in results} == {reason}
    assert [r.duplicate_index for r in results] == [0, 1, 2]
    assert all(r.message for r in results)


def test_ragged_table_is_skipped(tokenizer):
    interaction = _interaction()
    interaction.table.rows[1].cells.add(text="extra")
    results = list(_maker(tokenizer, dupe_factor=2).make(interaction))
    assert {r.reason for r in results} == {SkipReason.RAGGED_TABLE}
    assert results[0].table_id == "t"


def test_interaction_id_stands_in_for_a_missing_table_id(tokenizer):
    [example] = _examples(_maker(tokenizer, dupe_factor=1), _interaction(table_id="", interaction_id="i7"))
    assert example.table_id == example.features["table_id"] == "i7"


# --- split and config -----------------------------------------------------------------------------


def test_split_by_table_id_is_stable_and_close_to_the_fraction():
    ids = [f"http://en.wikipedia.org/wiki/Page_{i}_{i % 7}" for i in range(20000)]
    splits = [split_of(table_id, 0.1) for table_id in ids]
    assert splits == [split_of(table_id, 0.1) for table_id in ids]
    assert abs(splits.count("test") / len(ids) - 0.1) < 0.01
    assert {split_of(table_id, 0.0) for table_id in ids[:500]} == {"train"}
    assert {split_of(table_id, 1.0) for table_id in ids[:500]} == {"test"}
    # A smaller fraction keeps a subset of the test tables.
    assert all(split_of(t, 0.1) == "test" for t in ids[:2000] if split_of(t, 0.05) == "test")
    with pytest.raises(ValueError, match="test_fraction"):
        split_of("t", 1.5)


@pytest.mark.parametrize("overrides, message", [
    ({"min_snippet_pieces": 0}, "min_snippet_pieces"),
    ({"min_snippet_pieces": 9, "max_snippet_pieces": 8}, "min_snippet_pieces"),
    ({"max_seq_length": 18}, "no room for a table"),
    ({"max_predictions_per_seq": 0}, "max_predictions_per_seq"),
    ({"masked_lm_prob": 0.0}, "masked_lm_prob"),
    ({"masked_lm_prob": 1.5}, "masked_lm_prob"),
    ({"dupe_factor": 0}, "dupe_factor"),
    ({"test_fraction": -0.1}, "test_fraction"),
])
def test_config_is_validated(overrides, message):
    with pytest.raises(ValueError, match=message):
        PretrainConfig(vocab_file="vocab.txt", **overrides)


def test_config_types_are_checked():
    with pytest.raises(TypeError, match="random_seed"):
        PretrainConfig(vocab_file="vocab.txt", random_seed="1")
    with pytest.raises(TypeError, match="always_continue_cells"):
        PretrainConfig(vocab_file="vocab.txt", always_continue_cells=1)


def test_defaults_are_the_papers():
    config = PretrainConfig(vocab_file="vocab.txt")
    assert (config.max_seq_length, config.max_predictions_per_seq, config.masked_lm_prob,
            config.min_snippet_pieces, config.max_snippet_pieces, config.dupe_factor,
            config.always_continue_cells) == (128, 20, 0.15, 8, 16, 10, True)


# --- tf.Example and the model ---------------------------------------------------------------------


def _parsed(examples, max_seq_length, max_predictions, include_strings=True):
    import tensorflow as tf

    spec = example_features.pretrain_parsing_spec(max_seq_length, max_predictions, include_strings)
    serialized = [e.to_tf_example().SerializeToString() for e in examples]
    return tf.io.parse_example(serialized, spec)


def test_tf_example_round_trip(tokenizer):
    maker = _maker(tokenizer, max_seq_length=40, dupe_factor=3)
    examples = _examples(maker, _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)]))
    parsed = _parsed(examples, 40, 20)
    assert set(parsed) == set(examples[0].features)
    for index, example in enumerate(examples):
        for name, value in example.features.items():
            got = parsed[name][index].numpy()
            if name == "table_id":
                assert got.tolist() == [value.encode()]
            else:
                np.testing.assert_array_equal(got, np.asarray(value).reshape(got.shape), err_msg=name)


def test_features_fit_the_masked_lm_model(tokenizer):
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tf_keras

    from tapas_tf.models.pretrain_model import TapasForMaskedLM
    from tests.model_fixtures import tiny_config

    maker = _maker(tokenizer, max_seq_length=40, dupe_factor=4)
    features = _parsed(_examples(maker, _interaction(texts=[("SEGMENT_TEXT", LONG_TEXT)])), 40, 20,
                       include_strings=False)
    tf_keras.utils.set_random_seed(0)
    model = TapasForMaskedLM(tiny_config(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                         intermediate_size=32, max_position_embeddings=64))
    outputs = model(dict(features))
    assert outputs["mlm_logits"].shape == (4, 20, tokenizer.vocab_size)
    loss = float(outputs["mlm_loss"])
    assert np.isfinite(loss) and loss > 0
