"""Tests for tapas_tf.features.tokenization: BERT basic tokenisation, WordPiece, [EMPTY] cells.

Expected pieces are worked out by hand against the fixture vocabulary of
`tests/vocab_fixture.py`: specials at ids 0-5, the 32 ASCII punctuation
characters from id 6 ("!" 6, "," 17, "." 19), digits, letters, `##` pieces for
each digit and letter, a few suffixes ("##s", "##er", "##ing") and common words.
"""

import os
import pickle
import random
import string

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest

from tapas_tf.features import tokenization
from tapas_tf.features.tokenization import TapasTokenizer
from tests.features.bert_reference_tokenization import reference_tokenize
from tests.vocab_fixture import write_test_vocab

_EXTRA_WORDS = ("cafe", "##²", "中", "国")


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write_test_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", _EXTRA_WORDS)


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return TapasTokenizer(vocab_file)


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# --- Vocabulary and special ids ---------------------------------------------


def test_special_ids_follow_bert_layout(vocab_file):
    tokenizer = TapasTokenizer(vocab_file)
    assert (tokenizer.pad_id, tokenizer.empty_id, tokenizer.unk_id) == (0, 1, 2)
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (3, 4, 5)
    assert tokenizer.vocab_file == vocab_file
    with open(vocab_file, encoding="utf-8") as f:
        assert tokenizer.vocab_size == len(f.read().splitlines())


def test_ids_round_trip(tokenizer):
    tokens = ["[CLS]", "!", ",", ".", "0", "a", "##0", "##a", "[SEP]"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    # 6 specials, then "!"=6 ... ","=17 "."=19, 10 digits from 38, 26 letters from 48,
    # "##0" from 74, "##a" from 84.
    assert ids == [3, 6, 17, 19, 38, 48, 74, 84, 4]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens


def test_unknown_piece_and_bad_id_raise(tokenizer):
    with pytest.raises(ValueError, match="'zzz' is not in the vocabulary"):
        tokenizer.convert_tokens_to_ids(["a", "zzz"])
    with pytest.raises(ValueError, match="Id 100000 is outside the vocabulary"):
        tokenizer.convert_ids_to_tokens([0, 100000])
    with pytest.raises(ValueError, match="Id -1 is outside"):
        tokenizer.convert_ids_to_tokens([-1])


# --- Hand-checked tokenisation (both paths) ----------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World!", ["hello", ",", "world", "!"]),
        ("", []),
        (" \t\n ", []),
        # Punctuation, including BERT's ASCII symbols "$", "^", "`".
        ("u.s.a.", ["u", ".", "s", ".", "a", "."]),
        ("$1,000.50", ["$", "1", ",", "0", "##0", "##0", ".", "5", "##0"]),
        ("a^b`c", ["a", "^", "b", "`", "c"]),
        # Greedy longest match first, then "##" pieces.
        ("players", ["players"]),
        ("playing", ["p", "##l", "##a", "##y", "##ing"]),
        ("scored", ["score", "##d"]),
        ("Winners", ["win", "##n", "##er", "##s"]),
        # A word of exactly 100 characters is split; of 101, it is [UNK].
        ("a" * 100, ["a"] + ["##a"] * 99),
        ("a" * 101, ["[UNK]"]),
        ("x" + "a" * 100 + " total", ["[UNK]", "total"]),
        # Special-token text is tokenised like any other text.
        ("[MASK]", ["[", "m", "##a", "##s", "##k", "]"]),
        # Tab, newline and carriage return are spaces.
        ("name\tage\ncity\rrank", ["name", "age", "city", "rank"]),
    ],
)
def test_ascii_strings(tokenizer, text, expected):
    assert tokenizer.tokenize(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # Lower-case, NFD, drop combining marks.
        ("café", ["cafe"]),
        ("CAFÉ", ["cafe"]),
        ("cafe\u0301", ["cafe"]),  # Already decomposed.
        ("Naïve", ["n", "##a", "##i", "##v", "##e"]),
        # BERT keeps "²" (NFD, not NFKD); tensorflow-text's FastBertTokenizer says "km ##2".
        ("km²", ["km", "##²"]),
        # BERT keeps "ß"; with no piece for it the word is [UNK] (fast: "strasse").
        ("Straße", ["[UNK]"]),
        # CJK ideographs are split one by one, even without spaces.
        ("中国city", ["中", "国", "city"]),
        # Unicode punctuation (P*) is split off; a character with no piece is [UNK].
        ("a—b", ["a", "[UNK]", "b"]),
        ("hello ☃", ["hello", "[UNK]"]),
        ("x☃y", ["[UNK]"]),
        # Unicode space separators split words; format characters are deleted.
        ("a\u00a0b", ["a", "b"]),
        ("a\u200bb", ["a", "##b"]),
        ("a\ufffdb", ["a", "##b"]),
        # U+2028 is not whitespace to BERT's cleaner, but str.split() splits on it.
        ("a\u2028b", ["a", "b"]),
    ],
)
def test_non_ascii_strings(tokenizer, text, expected):
    assert tokenizer.tokenize(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # BERT deletes ASCII control characters (tensorflow-text's FastBertTokenizer splits on them).
        ("a\x0cb", ["a", "##b"]),
        ("a\x0bb", ["a", "##b"]),
        ("a\x00b", ["a", "##b"]),
        ("a\x1fb", ["a", "##b"]),
        ("a\x7fb", ["a", "##b"]),
    ],
)
def test_ascii_control_characters_are_deleted(tokenizer, text, expected):
    assert tokenizer.tokenize(text) == expected


def test_batch_keeps_order(tokenizer):
    texts = ["km²", "Hello, World!", "", "a\x0cb", "中国city", "players"]
    expected = [
        ["km", "##²"],
        ["hello", ",", "world", "!"],
        [],
        ["a", "##b"],
        ["中", "国", "city"],
        ["players"],
    ]
    assert tokenizer.tokenize_batch(texts) == expected
    assert tokenizer.tokenize_to_ids_batch(texts) == [
        tokenizer.convert_tokens_to_ids(pieces) for pieces in expected
    ]
    assert tokenizer.tokenize_batch([]) == []


def test_bad_input_raises(tokenizer):
    with pytest.raises(ValueError, match="single string"):
        tokenizer.tokenize_batch("hello")
    with pytest.raises(ValueError, match="Expected str texts, got bytes"):
        tokenizer.tokenize_batch(["a", b"b"])


# --- Empty cells and word boundaries -----------------------------------------


def test_empty_cells(tokenizer):
    cells = ["", "  ", "n/a", "-", "N/A", "—", "Paris", "?", "0"]
    assert tokenizer.tokenize_cells(cells) == [
        ["[EMPTY]"], ["[EMPTY]"], ["[EMPTY]"], ["[EMPTY]"], ["[EMPTY]"], ["[EMPTY]"],
        ["paris"], ["[EMPTY]"], ["0"],
    ]
    assert tokenizer.tokenize_cells_to_ids(["", "0"]) == [[1], [38]]
    assert tokenizer.tokenize_cell("n/a") == ["[EMPTY]"]
    # The [EMPTY] rule is for cells only.
    assert tokenizer.tokenize("n/a") == ["n", "/", "a"]


def test_word_start_flags():
    pieces = ["win", "##n", "##er", "##s", "teams", "[EMPTY]"]
    assert tokenization.word_start_flags(pieces) == [True, False, False, False, True, True]
    assert tokenization.is_continuation_piece("##s")
    assert not tokenization.is_continuation_piece("#")


# --- Vocabulary files ---------------------------------------------------------


def test_vocab_without_empty_token_raises(tmp_path):
    path = _write_lines(
        tmp_path / "bert_vocab.txt",
        ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"],
    )
    with pytest.raises(ValueError) as error:
        TapasTokenizer(path)
    message = str(error.value)
    assert path in message
    assert "[unused0] renamed [EMPTY]" in message


def test_vocab_without_special_token_raises(tmp_path):
    path = _write_lines(tmp_path / "vocab.txt", ["[PAD]", "[EMPTY]", "[UNK]", "[SEP]", "a"])
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[CLS\]', '\[MASK\]'\]"):
        TapasTokenizer(path)


@pytest.mark.parametrize(
    "lines, message",
    [
        (["[PAD]", "", "[UNK]"], "line 2 is blank"),
        (["[PAD]", "a", "a"], "'a' on line 3 already occurs on line 2"),
    ],
)
def test_malformed_vocab_raises(tmp_path, lines, message):
    with pytest.raises(ValueError, match=message):
        tokenization.load_vocab(_write_lines(tmp_path / "vocab.txt", lines))


def test_ensure_empty_token_vocab_renames_unused0(tmp_path):
    raw = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]
    src = _write_lines(tmp_path / "bert.txt", raw)
    dst = str(tmp_path / "out" / "tapas.txt")
    assert tokenization.ensure_empty_token_vocab(src, dst) == dst
    with open(dst, encoding="utf-8") as f:
        assert f.read().splitlines() == [
            "[PAD]", "[EMPTY]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"
        ]
    tokenizer = TapasTokenizer(dst)
    assert (tokenizer.empty_id, tokenizer.unk_id, tokenizer.vocab_size) == (1, 3, 8)
    assert tokenizer.tokenize_cells(["Hello", ""]) == [["hello"], ["[EMPTY]"]]


def test_ensure_empty_token_vocab_copies_tapas_vocab(tmp_path, vocab_file):
    dst = tokenization.ensure_empty_token_vocab(vocab_file, str(tmp_path / "copy.txt"))
    with open(vocab_file, encoding="utf-8") as src_f, open(dst, encoding="utf-8") as dst_f:
        assert dst_f.read() == src_f.read()


def test_ensure_empty_token_vocab_without_slot_raises(tmp_path):
    src = _write_lines(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "a"])
    with pytest.raises(ValueError, match=r"has neither \[EMPTY\] nor \[unused0\]"):
        tokenization.ensure_empty_token_vocab(src, str(tmp_path / "out.txt"))


def test_fixture_rejects_whitespace_words(tmp_path):
    with pytest.raises(ValueError, match="contains whitespace"):
        write_test_vocab(tmp_path / "vocab.txt", ["two words"])


# --- Equal to BERT's reference tokeniser on random text --------------------------------


# Beyond ASCII: accents (composed and not), CJK, Hangul, symbols, Unicode punctuation and spaces,
# format and control characters, U+FFFD, ligatures.
_OTHER_CHARACTERS = "éÉèüÜñßøÅçœﬁİı²³½€£¥©™°µ中国東京서울ひらがなД—–…“”«»¡¿\u00a0\u2009\u200b\u2028\ufeff\ufffd\x00\x0c\x7f\u0301"


def _random_texts(rng: random.Random, count: int) -> list[str]:
    """Words, numbers, punctuation, long words, ASCII and not."""
    words = ["the", "Name", "POPULATION", "players", "win", "x", "qz", "1999", "3.5", "U.S.", "Café", "km²"]
    alphabet = string.ascii_letters + string.digits + string.punctuation + " \t\n\r" + _OTHER_CHARACTERS
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 8)):
            kind = rng.random()
            if kind < 0.4:
                parts.append(rng.choice(words))
            elif kind < 0.8:
                parts.append("".join(rng.choices(alphabet, k=rng.randint(1, 12))))
            elif kind < 0.9:
                parts.append(str(rng.randint(0, 10**9)))
            else:  # Around the 100-character word limit, letters or digits.
                chars = string.ascii_lowercase if rng.random() < 0.5 else string.digits
                parts.append("".join(rng.choices(chars, k=rng.randint(95, 105))))
        texts.append(rng.choice([" ", "", "-", "\t"]).join(parts))
    return texts


def _sparse_vocab(tmp_path) -> str:
    """Letters a-m only and a few punctuation marks: many words become [UNK]."""
    letters = string.ascii_lowercase[:13]
    tokens = ["[PAD]", "[EMPTY]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "-"]
    tokens += list(letters) + ["##" + c for c in letters] + list(string.digits)
    tokens += ["##" + c for c in string.digits[:5]] + ["the", "game", "##s", "##ed"]
    return _write_lines(tmp_path / "sparse.txt", tokens)


@pytest.mark.parametrize("which_vocab", ["fixture", "sparse"])
def test_equal_to_berts_reference_on_random_text(tmp_path, vocab_file, which_vocab):
    path = vocab_file if which_vocab == "fixture" else _sparse_vocab(tmp_path)
    texts = _random_texts(random.Random(1234), 3000)
    ours = TapasTokenizer(path).tokenize_batch(texts)
    vocab = set(tokenization.load_vocab(path))
    reference = [reference_tokenize(text, vocab) for text in texts]
    differing = [text for text, a, b in zip(texts, ours, reference) if a != b]
    assert differing == []
    # The sample does reach the cases worth comparing.
    flat = [piece for pieces in reference for piece in pieces]
    assert "[UNK]" in flat and any(piece.startswith("##") for piece in flat)
    assert sum(not text.isascii() for text in texts) > 1000


def test_pickle_round_trip(vocab_file):
    tokenizer = TapasTokenizer(vocab_file)
    before = tokenizer.tokenize_batch(["Hello, World!", "km²"])
    restored = pickle.loads(pickle.dumps(tokenizer))
    assert restored.vocab_file == vocab_file
    assert restored.tokenize_batch(["Hello, World!", "km²"]) == before
