"""Writes a small data set in the SQA release format, for demos and tests.

    python -m tapas_tf.sample_data --output_dir=/tmp/sqa_sample

The tables and question sequences are made up for this project. The layout is
that of the SQA release: `table_csv/*.csv` and the TSV files
`random-split-1-train.tsv`, `random-split-1-dev.tsv` and `test.tsv` with the
columns `id annotator position question table_file answer_coordinates answer_text`.
"""

import csv
import os
from typing import Dict, List, Sequence, Tuple

TABLES: Dict[str, List[List[str]]] = {
    "cities.csv": [
        ["City", "Country", "Population", "Founded"],
        ["Paris", "France", "2,161,000", "3rd century BC"],
        ["Berlin", "Germany", "3,645,000", "1237"],
        ["Madrid", "Spain", "3,266,000", "9th century"],
        ["Rome", "Italy", "2,873,000", "753 BC"],
        ["Vienna", "Austria", "1,897,000", "1155"],
    ],
    "medals.csv": [
        ["Rank", "Nation", "Gold", "Silver", "Bronze", "Total"],
        ["1", "United States", "46", "37", "38", "121"],
        ["2", "Great Britain", "27", "23", "17", "67"],
        ["3", "China", "26", "18", "26", "70"],
        ["4", "Russia", "19", "18", "19", "56"],
        ["5", "Germany", "17", "10", "15", "42"],
    ],
    "albums.csv": [
        ["Year", "Title", "Label", "Peak position"],
        ["1998", "First Light", "Blue Note", "12"],
        ["2001", "Northern Lines", "Verve", "4"],
        ["2004", "Harbour", "Verve", ""],
        ["2009", "Late Trains", "Impulse!", "27"],
    ],
    "races.csv": [
        ["Date", "Race", "Winner", "Team", "Laps"],
        ["March 14, 2010", "Bahrain Grand Prix", "Fernando Alonso", "Ferrari", "49"],
        ["March 28, 2010", "Australian Grand Prix", "Jenson Button", "McLaren", "58"],
        ["April 4, 2010", "Malaysian Grand Prix", "Sebastian Vettel", "Red Bull", "56"],
        ["April 18, 2010", "Chinese Grand Prix", "Jenson Button", "McLaren", "56"],
    ],
}

# (sequence id, table, [(question, [(row, column), ...]), ...]); one annotator each.
Sequence_ = Tuple[str, str, List[Tuple[str, List[Tuple[int, int]]]]]

SPLITS: Dict[str, List[Sequence_]] = {
    "random-split-1-train.tsv": [
        ("s-1", "cities.csv", [
            ("which cities are listed?", [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]),
            ("which of them has more than 3 million people?", [(1, 0), (2, 0)]),
            ("which one is in spain?", [(2, 0)]),
        ]),
        ("s-2", "medals.csv", [
            ("which nations won more than 20 gold medals?", [(0, 1), (1, 1), (2, 1)]),
            ("how many silver medals did china win?", [(2, 3)]),
        ]),
        ("s-3", "albums.csv", [
            ("what albums were released on verve?", [(1, 1), (2, 1)]),
            ("which of those peaked at 4?", [(1, 1)]),
        ]),
        ("s-4", "races.csv", [
            ("who won the chinese grand prix?", [(3, 2)]),
            ("what team did he drive for?", [(3, 3)]),
        ]),
    ],
    "random-split-1-dev.tsv": [
        ("s-5", "cities.csv", [
            ("what country is vienna in?", [(4, 1)]),
            ("what is its population?", [(4, 2)]),
        ]),
        ("s-6", "medals.csv", [
            ("which nation ranked first?", [(0, 1)]),
            ("how many total medals did it win?", [(0, 5)]),
        ]),
    ],
    "test.tsv": [
        ("s-7", "races.csv", [
            ("which races had 56 laps?", [(2, 1), (3, 1)]),
        ]),
    ],
}

TSV_HEADER = ["id", "annotator", "position", "question", "table_file", "answer_coordinates", "answer_text"]


def _answer_fields(table: List[List[str]], coordinates: Sequence[Tuple[int, int]]) -> Tuple[str, str]:
    body = table[1:]
    return (str([f"({r}, {c})" for r, c in coordinates]),
            str([body[r][c] for r, c in coordinates]))


def write_sample(output_dir: str) -> Dict[str, int]:
    """Writes the sample data set; returns the number of questions per TSV file."""
    os.makedirs(os.path.join(output_dir, "table_csv"), exist_ok=True)
    for name, rows in TABLES.items():
        with open(os.path.join(output_dir, "table_csv", name), "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(rows)
    counts = {}
    for file_name, sequences in SPLITS.items():
        with open(os.path.join(output_dir, file_name), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(TSV_HEADER)
            for sequence_id, table, questions in sequences:
                for position, (question, coordinates) in enumerate(questions):
                    writer.writerow([sequence_id, 0, position, question, f"table_csv/{table}",
                                     *_answer_fields(TABLES[table], coordinates)])
        counts[file_name] = sum(len(q) for _, _, q in sequences)
    return counts
