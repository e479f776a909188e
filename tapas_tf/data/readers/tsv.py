"""Streaming TSV reading in which every physical line is accounted for.

Release files are read line by line as bytes, so that one bad byte costs its line and never the
rest of the file: a line that is not UTF-8 becomes a `ReaderError("invalid_utf8")` and the
reading goes on. The decoded lines go through the `csv` module, so quoted fields (which may hold
tabs and newlines, as in SQA's release) keep their meaning; each record knows the physical lines
it came from.

A record whose field count is wrong and that spans several lines was most likely made by an
unbalanced quote that swallowed the lines after it. Its lines are read again one by one: the
line with the stray quote becomes one `malformed_line` failure, and the lines it had swallowed
are records again.

Accounting (the contract of docs/DATA_CONTRACT.md): after iteration,
`lines_read == header_lines + sum(record.num_lines) + sum(error.num_lines)`.
"""

import csv
import dataclasses
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from tapas_tf.data.readers.common import ReaderError


@dataclasses.dataclass(frozen=True)
class TsvRecord:
    """One record of a TSV file: its fields by column name, and where it was.

    `first_line` and `last_line` are 1-based physical line numbers (equal unless a quoted field
    holds a newline).
    """

    fields: Dict[str, str]
    path: str
    first_line: int
    last_line: int

    @property
    def num_lines(self) -> int:
        return self.last_line - self.first_line + 1

    @property
    def location(self) -> str:
        return f"{self.path}:{line_range(self.first_line, self.last_line)}"


def line_range(first: int, last: int) -> str:
    """"7" or "7-9"."""
    return str(first) if first == last else f"{first}-{last}"


class HeaderError(ReaderError):
    """The file's header lacks a required column (or there is no header): the whole file is unusable."""


class TsvReader:
    """Iterates the records of one TSV file, with an error in place of each unusable line.

    Args:
      path: the TSV file; its first line is the header.
      required_columns: columns the header must name (in any order; others are ignored).
      quoting: whether `"` quotes fields (SQA: yes; WikiTableQuestions escapes instead: no).

    Iterating yields `TsvRecord`s and `ReaderError`s in line order. A missing file or a header
    without the required columns raises `ReaderError` / `HeaderError` from `check_header`, and is
    yielded (covering every line of the file) when iterating.
    """

    def __init__(self, path: str, required_columns: Sequence[str], quoting: bool = True):
        self.path = path
        self.required_columns = tuple(required_columns)
        self._dialect = dict(delimiter="\t", quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE,
                             strict=False)
        self.lines_read = 0
        self.header_lines = 0

    # --- the header ---------------------------------------------------------------------------

    def check_header(self) -> List[str]:
        """The header's column names; raises HeaderError naming the file and the missing columns."""
        try:
            with open(self.path, "rb") as f:
                first = f.readline()
        except FileNotFoundError:
            raise ReaderError("missing_file", f"{self.path}: file not found", path=self.path) from None
        except OSError as e:
            raise ReaderError("unreadable_file", f"{self.path}: {e.strerror or e}", path=self.path) from None
        return self._parse_header(first)

    def _parse_header(self, raw: bytes) -> List[str]:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HeaderError("bad_header", f"{self.path}:1: the header is not UTF-8 (byte {e.start})",
                              path=self.path) from None
        try:
            header = next(csv.reader([text], **self._dialect), [])
        except csv.Error as e:
            raise HeaderError("bad_header", f"{self.path}:1: the header does not parse ({e})",
                              path=self.path) from None
        if not header:
            raise HeaderError("bad_header", f"{self.path}:1: the file has no header line", path=self.path)
        missing = [c for c in self.required_columns if c not in header]
        if missing:
            raise HeaderError(
                "bad_header", f"{self.path}:1: the header lacks the column(s) {', '.join(missing)} "
                f"(it has {', '.join(header)}; required: {', '.join(self.required_columns)})", path=self.path)
        return header

    # --- the records ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Union[TsvRecord, ReaderError]]:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            yield ReaderError("missing_file", f"{self.path}: file not found", path=self.path)
            return
        except OSError as e:
            yield ReaderError("unreadable_file", f"{self.path}: {e.strerror or e}", path=self.path)
            return
        with f:
            first = f.readline()
            if not first:
                return  # An empty file: nothing to account for.
            self.lines_read = 1
            try:
                header = self._parse_header(first)
            except HeaderError as e:
                # The whole file is unusable: one failure covering all of its lines.
                self.lines_read += sum(1 for _ in f)
                yield HeaderError(e.reason, str(e), path=self.path, first_line=1, last_line=self.lines_read)
                return
            self.header_lines = 1
            yield from self._records(f, header)

    def _records(self, f, header: List[str]) -> Iterator[Union[TsvRecord, ReaderError]]:
        pending_errors: List[ReaderError] = []
        fed: List[Tuple[int, str]] = []  # (physical line, text) of lines given to csv, not yet in a record

        def decoded_lines() -> Iterator[str]:
            for raw in f:
                self.lines_read += 1
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    pending_errors.append(ReaderError(
                        "invalid_utf8", f"{self.path}:{self.lines_read}: byte {e.start} of the line is "
                        f"not valid UTF-8 ({e.reason}); the line is skipped", path=self.path,
                        first_line=self.lines_read, last_line=self.lines_read))
                    continue
                fed.append((self.lines_read, text))
                yield text

        reader = csv.reader(decoded_lines(), **self._dialect)
        while True:
            try:
                fields: Optional[List[str]] = next(reader)
                problem = None
            except StopIteration:
                break
            except csv.Error as e:
                fields, problem = None, str(e)
            yield from pending_errors
            pending_errors.clear()
            lines = list(fed)
            fed.clear()
            if not lines:
                continue
            yield from self._record_or_errors(fields, problem, lines, header)
        yield from pending_errors

    def _record_or_errors(self, fields: Optional[List[str]], problem: Optional[str],
                          lines: List[Tuple[int, str]], header: List[str]
                          ) -> Iterator[Union[TsvRecord, ReaderError]]:
        if fields is not None and len(fields) == len(header):
            yield TsvRecord(dict(zip(header, fields)), self.path, lines[0][0], lines[-1][0])
            return
        if len(lines) > 1:
            # Most likely a stray quote swallowed the following lines: read each line alone.
            for number, text in lines:
                alone = next(csv.reader([text], **self._dialect), [])
                yield from self._record_or_errors(alone, None, [(number, text)], header)
            return
        number = lines[0][0]
        if problem is not None:
            message = f"{self.path}:{number}: {problem}"
        elif not fields:
            yield ReaderError("blank_line", f"{self.path}:{number}: blank line", path=self.path,
                              first_line=number, last_line=number)
            return
        else:
            message = (f"{self.path}:{number}: expected {len(header)} tab-separated fields "
                       f"({', '.join(header)}), found {len(fields)}")
        yield ReaderError("malformed_line", message, path=self.path, first_line=number, last_line=number)


class ReleaseFile:
    """A release TSV file read into Interactions, with its lines accounted for (the base of the
    SQA and WTQ readers).

    Subclasses set `COLUMNS` (and `QUOTING`) and implement `interactions()`, adding to
    `question_lines` and `questions_read` for every question they read. After iterating,
    `lines_read == header_lines + question_lines + the lines of the line errors yielded`.
    """

    COLUMNS: Sequence[str] = ()
    QUOTING = True
    # Lines of a separate tables file (WikiSQL's); the TSV releases keep tables in CSV files.
    table_lines_read = 0
    table_lines_used = 0

    def __init__(self, tsv_path: str, input_dir: str):
        self.tsv_path = tsv_path
        self.input_dir = input_dir
        self._tsv = TsvReader(tsv_path, self.COLUMNS, quoting=self.QUOTING)
        self.question_lines = 0
        self.questions_read = 0

    @property
    def lines_read(self) -> int:
        return self._tsv.lines_read

    @property
    def header_lines(self) -> int:
        return self._tsv.header_lines

    def reader_counts(self) -> Dict[str, int]:
        """Counts a reader keeps beyond the line accounting (none here); the job reports them."""
        return {}

    def check_header(self) -> None:
        """Raises ReaderError naming the file and the missing columns (or a missing file)."""
        self._tsv.check_header()

    def _count(self, record) -> None:
        """Counts one question read from `record` (anything with `num_lines`)."""
        self.question_lines += record.num_lines
        self.questions_read += 1
