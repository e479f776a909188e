"""Tables too big for one example, read in windows through TableQA (window_encoding, window_reading).

No trained model: a scripted runner reads the features it is given and "selects" cells by rule,
so every expected answer is computed by hand from the table. The encoder is real (the test
vocabulary) with a 64-token sequence, so that a 30-row table needs several windows:

    row  name  colour  points        colour "red" on rows 0, 3, 6, ... (every third row)
    0    a0    red     0             points = 7 * row mod 31 (distinct: 31 is prime)
    1    a1    blue    7
    ...
    29   a29   blue    17            the largest points, 30, is on row 22
"""

import math

import numpy as np
import pandas as pd
import pytest

from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.inference.decoding import DecodingRule
from tapas_tf.qa.ask_encoding import TableEncoder
from tapas_tf.qa.table_qa import TableQA
from tapas_tf.qa.window_encoding import WindowedQuestion, encode_windows, pack_rows
from tests.vocab_fixture import write_test_vocab

ROWS = 30
POINTS = [7 * r % 31 for r in range(ROWS)]
TABLE = pd.DataFrame({"name": [f"a{r}" for r in range(ROWS)],
                      "colour": ["red" if r % 3 == 0 else "blue" for r in range(ROWS)],
                      "points": [str(p) for p in POINTS]})
NAME, COLOUR, POINTS_COLUMN = 0, 1, 2
OPERATORS = {"NONE": 0, "SUM": 1, "AVERAGE": 2, "COUNT": 3}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    write_test_vocab(str(path))
    return str(path)


def make_encoder(vocab, max_seq_length=64, trained_rows=63):
    config = ConversionConfig(vocab_file=vocab, max_seq_length=max_seq_length, max_row_id=256, max_column_id=256,
                              fail_on_dropped_answers=False)
    return TableEncoder(config, trained_rows=trained_rows)


class ScriptedRunner:
    """Selects, in every example, the tokens `select(features, token)` says (probability 0.9, else
    0.05), and answers `operator` with aggregation probability ~0.97."""

    has_aggregation_head = True
    backend = "scripted"

    def __init__(self, select, operator="NONE"):
        self.select, self.operator, self.calls, self.examples = select, operator, 0, []

    def __call__(self, length, rows):
        self.calls += 1
        probabilities = np.full((len(rows), length), 0.05, np.float32)
        for i, features in enumerate(rows):
            self.examples.append(features)
            chosen = self.select(features)
            probabilities[i, chosen] = 0.9
        logits = np.zeros((len(rows), 4), np.float32)
        logits[:, OPERATORS[self.operator]] = 4.0
        return {"probabilities": probabilities, "aggregation_logits": logits}


def token_is(encoder, word, column):
    token = encoder.tokenizer.convert_tokens_to_ids([word])[0]
    return lambda f: (f["input_ids"] == token) & (f["column_ids"] == column + 1)


def column_of_rows_with(encoder, word, word_column, column):
    """The `column` tokens of the rows whose `word_column` holds `word`."""
    has_word = token_is(encoder, word, word_column)

    def select(f):
        rows = set(f["row_ids"][has_word(f)].tolist())
        return np.isin(f["row_ids"], list(rows)) & (f["column_ids"] == column + 1) & (f["row_ids"] > 0)
    return select


def qa_with(vocab, runner, **options):
    return TableQA(runner, make_encoder(vocab), DecodingRule(), name="scripted", **options)


def test_a_count_split_across_windows_counts_every_row(vocab):
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    result = qa_with(vocab, runner).answer(TABLE, "how many are red?")
    reds = [r for r in range(ROWS) if r % 3 == 0]
    assert result.reading.windows > 2 and result.reading.rows_read == ROWS
    assert result.operator == "COUNT" and result.value == len(reds) == 10
    assert result.coordinates == tuple((r, COLOUR) for r in reds)
    assert result.reading.windows_with_cells == result.reading.windows  # Every window holds a red row.


def test_an_average_over_uneven_windows_is_the_total_over_the_count(vocab):
    """Windows hold different numbers of red rows; the mean of the windows' averages would be wrong."""
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(column_of_rows_with(encoder, "red", COLOUR, POINTS_COLUMN), "AVERAGE")
    result = qa_with(vocab, runner).answer(TABLE, "what is the average points of red?")
    reds = [POINTS[r] for r in range(ROWS) if r % 3 == 0]
    assert result.operator == "AVERAGE"
    assert result.value == pytest.approx(sum(reds) / len(reds))
    assert result.numbers == tuple(float(p) for p in reds)
    windows = encode_windows(encoder, encoder.prepare(TABLE), "what is the average points of red?").windows
    per_window = [sum(1 for r in w if r % 3 == 0) for w in windows]
    assert len(set(per_window)) > 1, per_window  # The windows really are uneven in red rows.


def test_a_sum_adds_every_window(vocab):
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(column_of_rows_with(encoder, "blue", COLOUR, POINTS_COLUMN), "SUM")
    result = qa_with(vocab, runner).answer(TABLE, "what is the total points of blue?")
    assert result.value == sum(POINTS[r] for r in range(ROWS) if r % 3 != 0)


def test_ranks_are_the_whole_columns_in_every_window(vocab):
    """The largest points (30, row 22) has inverse rank 1 in its window and nowhere else."""
    encoder = make_encoder(vocab)
    windowed = encode_windows(encoder, encoder.prepare(TABLE), "which has the highest points?")
    for rows in windowed.windows:
        f = windowed.features(rows)
        points = (f["column_ids"] == POINTS_COLUMN + 1) & (f["row_ids"] > 0)
        ranks = set(f["inv_column_ranks"][points].tolist())
        assert (1 in ranks) == (22 in rows)
        assert f["row_ids"][points].max() == len(rows)  # The window's rows are numbered 1..n.


def test_a_superlative_whose_winner_is_in_the_last_window_is_settled_by_a_second_pass(vocab):
    """Each window names its own largest points; the second pass over those rows finds the table's.
    The table's largest is moved to the last row, so the winner is in the last window."""
    table = TABLE.copy()
    table.loc[ROWS - 1, "points"] = "99"
    encoder = make_encoder(vocab)

    def local_best(f):  # The window's (or second pass's) highest points: its highest rank.
        points = (f["column_ids"] == POINTS_COLUMN + 1) & (f["row_ids"] > 0)
        return points & (f["column_ranks"] == f["column_ranks"][points].max())

    runner = ScriptedRunner(local_best)
    result = qa_with(vocab, runner).answer(table, "which has the highest points?")
    windows = encode_windows(encoder, encoder.prepare(table), "which has the highest points?").windows
    assert ROWS - 1 in windows[-1]
    assert result.operator == "NONE" and result.coordinates == ((ROWS - 1, POINTS_COLUMN),)
    assert result.answers == ("99",)
    assert result.reading.second_pass_rows >= len(windows)  # Each window's candidate, and related rows.
    assert runner.calls >= 2
    assert "asked again" in result.reading.sentence()


def test_a_lookup_in_one_window_is_asked_again_with_the_rows_most_related_to_the_question(vocab):
    table = TABLE.copy()
    table.loc[17, "colour"] = "green"
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(column_of_rows_with(encoder, "green", COLOUR, POINTS_COLUMN))
    result = qa_with(vocab, runner).answer(table, "what are the points of green?")
    assert result.coordinates == ((17, POINTS_COLUMN),) and result.answers == (str(POINTS[17]),)
    assert result.reading.windows_with_cells == 1 and result.reading.second_pass_rows > 1
    second = runner.examples[-1]  # The second pass: row 17 among the others that fit.
    assert len(set(second["row_ids"][second["row_ids"] > 0].tolist())) == result.reading.second_pass_rows


class UnsureRunner(ScriptedRunner):
    """Gives the chosen tokens 0.4, below the threshold: no window selects a cell."""

    def __call__(self, length, rows):
        outputs = super().__call__(length, rows)
        outputs["probabilities"] = np.where(outputs["probabilities"] > 0.5, 0.4, 0.05).astype(np.float32)
        return outputs


def test_when_no_window_selects_a_cell_their_best_cells_are_asked_again(vocab):
    """Each window's best cell is its highest points (0.4, not selected); the second pass over those
    rows falls back to its own best cell: the table's highest points, 30 on row 22."""
    def local_best(f):
        points = (f["column_ids"] == POINTS_COLUMN + 1) & (f["row_ids"] > 0)
        return points & (f["column_ranks"] == f["column_ranks"][points].max())

    runner = UnsureRunner(local_best)
    qa = TableQA(runner, make_encoder(vocab), DecodingRule(fallback_to_best_cell=True), name="scripted")
    result = qa.answer(TABLE, "which has the highest points?")
    assert result.reading.windows_with_cells == 0 and result.reading.second_pass_rows >= result.reading.windows
    assert result.coordinates == ((22, POINTS_COLUMN),)


def test_max_rows_reads_only_the_first_rows_and_says_so(vocab):
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    result = qa_with(vocab, runner, max_rows=10).answer(TABLE, "how many are red?")
    assert result.value == 4  # Rows 0, 3, 6, 9.
    assert result.reading.rows_read == 10 and result.reading.limit == "max_rows"
    assert any("first 10 of the table's 30 rows" in d for d in result.diagnostics)


def test_a_time_budget_stops_the_reading_and_the_answer_says_so(vocab, monkeypatch):
    from tapas_tf.qa import window_reading

    monkeypatch.setattr(window_reading, "CHUNK_WINDOWS", 1)
    ticks = iter(range(1000))
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    qa = qa_with(vocab, runner, time_budget=1.5)
    monkeypatch.setattr(window_reading.time, "monotonic", lambda: float(next(ticks)))
    qa_reader = window_reading.WindowReader(runner, DecodingRule(), time_budget=1.5,
                                            clock=lambda: float(next(ticks)))
    windowed = encode_windows(encoder, encoder.prepare(TABLE), "how many are red?")
    result = qa_reader.answer(windowed)
    assert result.reading.limit == "time_budget"
    assert result.reading.windows_read == 2 < result.reading.windows
    assert result.reading.rows_read == sum(len(w) for w in windowed.windows[:2])
    assert result.value == sum(1 for w in windowed.windows[:2] for r in w if r % 3 == 0)
    assert any("time budget of 1.5 s ran out" in d for d in result.diagnostics)
    assert qa.time_budget == 1.5


class RecordingBar:
    """A progress bar that records what the reader tells it."""

    def __init__(self, made, total):
        self.total, self.updates, self.closed = total, [], False
        made.append(self)

    def update(self, windows):
        self.updates.append(windows)

    def close(self):
        self.closed = True


def test_a_read_of_several_chunks_moves_a_progress_bar_a_chunk_at_a_time(vocab, monkeypatch):
    from tapas_tf.qa import window_reading

    monkeypatch.setattr(window_reading, "CHUNK_WINDOWS", 2)
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    windowed = encode_windows(encoder, encoder.prepare(TABLE), "how many are red?")
    made = []
    reader = window_reading.WindowReader(runner, DecodingRule(), progress=lambda total: RecordingBar(made, total))
    result = reader.answer(windowed)
    windows = len(windowed.windows)
    assert windows > 2 and result.value == 10
    (bar,) = made
    assert bar.total == windows and sum(bar.updates) == windows and bar.closed
    assert bar.updates == [2] * (windows // 2) + ([windows % 2] if windows % 2 else [])


def test_a_read_of_one_chunk_makes_no_bar_and_a_time_budget_closes_its_bar(vocab, monkeypatch):
    from tapas_tf.qa import window_reading

    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    windowed = encode_windows(encoder, encoder.prepare(TABLE), "how many are red?")
    made = []
    window_reading.WindowReader(runner, DecodingRule(), progress=lambda t: RecordingBar(made, t)).answer(windowed)
    assert made == []  # Every window in the first chunk: nothing to watch.
    monkeypatch.setattr(window_reading, "CHUNK_WINDOWS", 1)
    ticks = iter(range(1000))
    reader = window_reading.WindowReader(runner, DecodingRule(), time_budget=1.5, clock=lambda: float(next(ticks)),
                                         progress=lambda t: RecordingBar(made, t))
    assert reader.answer(windowed).reading.limit == "time_budget"
    (bar,) = made
    assert bar.updates == [1, 1] and bar.closed


def test_table_qa_shows_a_named_tqdm_bar_only_when_asked(vocab, monkeypatch, capsys):
    import io

    from tapas_tf.qa import window_reading

    monkeypatch.setattr(window_reading, "CHUNK_WINDOWS", 1)
    assert window_reading.progress_bar("x", False) is None
    stream = io.StringIO()  # Not a terminal: the automatic choice shows nothing there.
    window_reading.progress_bar("quiet", None, file=stream)(5).close()
    assert stream.getvalue() == ""
    shown = io.StringIO()
    bar = window_reading.progress_bar("scripted: 30 rows", True, file=shown)(5)
    bar.update(5)
    bar.close()
    assert "scripted: 30 rows:" in shown.getvalue() and "0/5 [" in shown.getvalue()  # Refreshes are throttled.
    encoder = make_encoder(vocab)
    qa_with(vocab, ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT"), progress=True).answer(
        TABLE, "how many are red?")
    assert "scripted: 30 rows" in capsys.readouterr().err
    qa_with(vocab, ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")).answer(TABLE, "how many are red?")
    assert capsys.readouterr().err == ""  # The API's default: no bar.


def test_a_big_table_says_what_it_prepares_before_its_windows_are_read(vocab, monkeypatch, capsys):
    from tapas_tf.qa import table_qa

    encoder = make_encoder(vocab)
    monkeypatch.setattr(table_qa, "STATUS_CELLS", ROWS * 3)  # TABLE's 90 cells count as big.
    qa = qa_with(vocab, ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT"), progress=True)
    assert qa.answer(TABLE, "how many are red?").value == 10
    err = capsys.readouterr().err
    assert "scripted: preparing 30 rows ..." in err and "scripted: tokens, numbers and ranks of 30 rows ..." in err
    monkeypatch.setattr(table_qa, "STATUS_CELLS", ROWS * 3 + 1)  # One cell short of big: no status.
    qa.answer(TABLE.assign(points=TABLE.points + "0"), "how many are red?")
    err = capsys.readouterr().err
    assert "preparing" not in err and "tokens, numbers" not in err


def test_a_follow_up_sees_the_previous_answer_in_its_window(vocab):
    encoder = make_encoder(vocab)
    windowed = encode_windows(encoder, encoder.prepare(TABLE), "and those?", previous_answer=[(25, NAME)])
    assert windowed.follow_up
    for rows in windowed.windows:
        f = windowed.features(rows)
        marked = set(f["row_ids"][f["prev_label_ids"] == 1].tolist())
        assert marked == ({rows.index(25) + 1} if 25 in rows else set())


def test_windows_off_prunes_as_before(vocab):
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    result = qa_with(vocab, runner, windows=False).answer(TABLE, "how many are red?")
    assert result.reading is None and any("pruned" in d for d in result.diagnostics)


def test_a_table_that_fits_is_one_example(vocab):
    runner = ScriptedRunner(lambda f: np.zeros(len(f["input_ids"]), bool))
    result = qa_with(vocab, runner).answer(TABLE.head(3), "which one?")
    assert result.reading is None and runner.calls == 1


def test_pack_rows_even_when_the_tokens_allow_and_greedy_otherwise():
    assert [list(w) for w in pack_rows(np.array([3] * 10), budget=12, max_rows=99)] == [
        [0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [list(w) for w in pack_rows(np.array([3] * 10), budget=99, max_rows=4)] == [
        [0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    # An even split of 5, 1, 1, 1 into two would put 6 tokens in the first half: greedy instead.
    assert [list(w) for w in pack_rows(np.array([5, 1, 1, 1]), budget=6, max_rows=99)] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="row 1 needs 9 tokens"):
        pack_rows(np.array([1, 9]), budget=8, max_rows=9)


def test_windows_hold_at_most_the_trained_rows(vocab):
    encoder = make_encoder(vocab, max_seq_length=512, trained_rows=7)
    windowed = encode_windows(encoder, encoder.prepare(TABLE), "how many are red?")
    assert max(len(w) for w in windowed.windows) <= 7
    assert sorted(r for w in windowed.windows for r in w) == list(range(ROWS))


def test_a_wide_table_keeps_the_columns_the_question_names(vocab):
    """60 columns of ten-piece cells cannot hold 4 rows in 64 tokens: the named column stays."""
    wide = pd.DataFrame({f"c{i}": ["x y z w v u t s r q"] * 8 for i in range(60)})
    wide["points"] = [str(i) for i in range(8)]
    encoder = make_encoder(vocab)
    windowed = encode_windows(encoder, encoder.prepare(wide), "what are the points?")
    assert wide.columns.get_loc("points") in windowed.columns
    assert len(windowed.columns) < 61
    assert any("columns were kept" in d for d in windowed.diagnostics)
    for rows in windowed.windows:
        assert len(windowed.features(rows)["input_ids"]) <= 64


def test_a_window_answer_names_rows_and_columns_of_the_users_table(vocab):
    encoder = make_encoder(vocab)
    runner = ScriptedRunner(token_is(encoder, "red", COLOUR), "COUNT")
    result = qa_with(vocab, runner).answer(TABLE, "how many are red?")
    cell = result.cells[-1]
    assert (cell.row, cell.column, cell.column_name, cell.text) == (27, COLOUR, "colour", "red")
    payload = result.to_dict()
    assert payload["reading"]["rows_read"] == ROWS and payload["reading"]["columns"] == ["name", "colour", "points"]
    assert not math.isnan(result.confidence)
    assert isinstance(encode_windows(encoder, encoder.prepare(TABLE), "q?"), WindowedQuestion)


def test_a_superlative_over_more_window_winners_than_one_example_holds_is_settled_by_a_knockout(vocab):
    """200 rows: every window names its own highest points, more winners than fit one example; groups
    of them are asked in rounds until the table's highest (1004, on row 33) is the answer."""
    rows = 200
    points = [(61 * r) % 1009 for r in range(rows)]  # Distinct; the largest is 1004, on row 33.
    table = pd.DataFrame({"name": [f"a{r}" for r in range(rows)], "points": [str(p) for p in points]})
    winner = max(range(rows), key=points.__getitem__)

    def local_best(f):  # Inverse rank 1 is the column's largest; each example picks its smallest.
        cells = (f["column_ids"] == 2) & (f["row_ids"] > 0)
        return cells & (f["inv_column_ranks"] == f["inv_column_ranks"][cells].min())

    runner = ScriptedRunner(local_best)
    result = qa_with(vocab, runner).answer(table, "which has the highest points?")
    assert result.reading.windows_with_cells == result.reading.windows > 8
    assert result.coordinates == ((winner, 1),) and result.answers == (str(points[winner]),)
    assert runner.calls > -(-result.reading.windows // 16) + 1  # The rounds of the knockout.
