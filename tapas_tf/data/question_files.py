"""Files of questions: a TSV with a header naming the columns `id` and `question` (and more).

    id      question                                   table_id
    q1      what is the height of torre jaume i?       csv/204-csv/590.csv

Read with the standard library's csv module (tab-separated, quotes allowed around a field that
holds a tab). Extra columns are kept. Errors name the file and line: a missing column, a row with
another number of fields than the header, an empty id or question, an id given twice.
"""

import csv
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple

__all__ = ["QuestionFileError", "questions_to_ask", "read_questions"]


class QuestionFileError(ValueError):
    """A questions file that cannot be read; the message names the file and line."""


def read_questions(path: str, columns: Sequence[str] = ("id", "question")) -> List[Dict[str, str]]:
    """The rows of a questions TSV as dicts (every column of the header), in file order.

    Args:
      path: the TSV file.
      columns: the columns that must be there, each non-empty in every row.

    Raises:
      QuestionFileError: a missing file or column, a ragged row, an empty required field, a
        repeated id.
    """
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return _parse(path, csv.reader(f, delimiter="\t"), columns)
    except FileNotFoundError:
        raise QuestionFileError(f"{path}: no such questions file") from None
    except UnicodeDecodeError as e:
        raise QuestionFileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except csv.Error as e:
        raise QuestionFileError(f"{path}: not a TSV file ({e})") from None


def _parse(path: str, reader: Iterable[List[str]], columns: Sequence[str]) -> List[Dict[str, str]]:
    header: Optional[List[str]] = None
    rows: List[Dict[str, str]] = []
    first_line: Dict[str, int] = {}
    for line, record in enumerate(reader, start=1):
        if not any(field.strip() for field in record):
            continue  # Blank lines (a trailing newline, spacing) are not rows.
        if header is None:
            header = [field.strip() for field in record]
            missing = [column for column in columns if column not in header]
            if missing:
                raise QuestionFileError(f"{path}:{line}: the header has no column {', '.join(missing)} "
                                        f"(it has {', '.join(header)}); the columns are tab-separated")
            continue
        if len(record) != len(header):
            raise QuestionFileError(f"{path}:{line}: {len(record)} tab-separated fields, the header has {len(header)}")
        row = {name: value.strip() for name, value in zip(header, record)}
        for column in columns:
            if not row[column]:
                raise QuestionFileError(f"{path}:{line}: the {column} is empty")
        if "id" in row:
            if row["id"] in first_line:
                raise QuestionFileError(f"{path}:{line}: the id {row['id']!r} is on line {first_line[row['id']]} too")
            first_line[row["id"]] = line
        rows.append(row)
    if header is None:
        raise QuestionFileError(f"{path} is empty: it needs a header line ({chr(9).join(columns)}) and rows")
    return rows


def questions_to_ask(arguments: Sequence[str], questions_file: Optional[str],
                     stdin: TextIO) -> Iterator[Tuple[str, str]]:
    """(id, question) pairs: the command line's words as one question (id "1"), else the rows of
    `questions_file`, else stdin's non-empty lines (ids "1", "2", ... by line).

    Raises:
      QuestionFileError: both a question and a questions file, or a bad file.
    """
    question = " ".join(arguments).strip()
    if question and questions_file:
        raise QuestionFileError("give a question or --questions_file, not both")
    if question:
        yield "1", question
        return
    if questions_file:
        for row in read_questions(questions_file):
            yield row["id"], row["question"]
        return
    for line_number, line in enumerate(stdin, start=1):
        if line.strip():
            yield str(line_number), line.strip()
