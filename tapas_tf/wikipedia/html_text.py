"""The text a reader sees in a piece of rendered Wikipedia HTML, as lines.

`element_lines` walks an lxml element and returns its visible text, as a reader of the page sees
it, with these rules:

- left out (with everything inside them): citation and editorial marks (`sup` of class
  `reference`, `noprint`, `Inline-Template` or `Template-Fact`: "[1]", "[citation needed]",
  "[update]"), `style` and `script`, sort keys (`class="sortkey"`, hidden by the site's CSS), any
  element with `display:none` in its `style`, "[edit]" links (`mw-editsection`, `editsection`),
  comments, and nested tables (a table inside a cell is a table of its own, not cell text);
- `<br>` and the edges of block elements (`p`, `div`, `li`, `ul`, ...) end a line, as the page
  renders them: Google's corpus keeps such breaks inside cells ("2013\\n(1st)");
- whitespace is collapsed within each line (newlines in the source are spaces, as in HTML), lines
  are stripped, and empty lines are dropped.

`cell_text` joins the lines with "\\n"; `plain_text` joins them with a space (paragraphs, headings,
captions).
"""

from typing import Iterator, List, Optional, Tuple

SKIPPED_TAGS = frozenset({"style", "script", "table", "noscript"})
# Classes of `sup` that are editorial marks, not content ("[1]", "[citation needed]", "[update]").
EDITORIAL_SUP_CLASSES = frozenset({"reference", "noprint", "Inline-Template", "Template-Fact"})
# Classes of elements that never show text in the article: sort keys and "[edit]" links.
HIDDEN_CLASSES = frozenset({"sortkey", "mw-editsection", "editsection"})
# Elements whose start and end break the line when rendered.
BLOCK_TAGS = frozenset({"p", "div", "li", "ul", "ol", "dl", "dd", "dt", "blockquote", "center",
                        "h1", "h2", "h3", "h4", "h5", "h6", "pre", "hr"})


def classes(element) -> frozenset:
    """The class tokens of an element (`class="wikitable sortable"` -> {wikitable, sortable})."""
    value = element.get("class")
    return frozenset(value.split()) if value else frozenset()


def is_hidden_style(element) -> bool:
    """Whether an inline style hides the element (`display: none`, any spacing or case)."""
    style = element.get("style")
    return bool(style) and "display:none" in "".join(style.split()).lower()


def is_skipped(element) -> bool:
    """Whether an element and everything inside it are left out of the text."""
    tag = element.tag
    if tag in SKIPPED_TAGS:
        return True
    names = classes(element)
    if tag == "sup" and names & EDITORIAL_SUP_CLASSES:
        return True
    return bool(names & HIDDEN_CLASSES) or is_hidden_style(element)


def _walk(root) -> Iterator[Optional[str]]:
    """The text pieces inside `root` in document order; None marks a line break.

    Iterative (an explicit stack), because broken markup can nest elements deeper than Python's
    recursion limit.
    """
    if root.text:
        yield root.text
    stack: List[Tuple[Iterator, object]] = [(iter(root), None)]
    while stack:
        children, owner = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if owner is not None:
                if owner.tag in BLOCK_TAGS:
                    yield None
                if owner.tail:
                    yield owner.tail
            continue
        if not isinstance(child.tag, str) or child.tag == "br" or is_skipped(child):
            # Comments and processing instructions have a function as tag; their text is not shown.
            if child.tag == "br":
                yield None
            if child.tail:
                yield child.tail
            continue
        if child.tag in BLOCK_TAGS:
            yield None
        if child.text:
            yield child.text
        stack.append((iter(child), child))


def element_lines(element) -> List[str]:
    """The visible lines of an element's content (its own tail excluded), whitespace collapsed."""
    lines: List[str] = []
    current: List[str] = []
    for piece in _walk(element):
        if piece is None:
            lines.append(" ".join("".join(current).split()))
            current = []
        else:
            current.append(piece)
    lines.append(" ".join("".join(current).split()))
    return [line for line in lines if line]


def cell_text(element) -> str:
    """A cell's text: its lines joined with newlines."""
    return "\n".join(element_lines(element))


def plain_text(element) -> str:
    """An element's text on one line (paragraphs, headings, captions)."""
    return " ".join(element_lines(element))
