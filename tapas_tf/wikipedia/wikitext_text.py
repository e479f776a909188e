"""Wikitext (parsed by mwparserfromhell) to the plain text a reader of the rendered page sees.

- Links become their label (`[[Foo|bar]]` -> "bar", `[[Foo]]` -> "Foo"); files, categories and
  interlanguage links vanish. An external link becomes its label, or its URL when bare.
- `<ref>`, `<references>`, `<gallery>`, `<math>`, nested `<table>`s and the like vanish; other
  tags (`<small>`, `<span>`, `<nowiki>`) give their contents. Bold and italic quotes vanish from
  the text (four quotes leave one apostrophe, as MediaWiki shows them): pages are parsed with
  `skip_style_tags`, because the parser's own pairing of quotes lets one stray pair swallow the
  rest of a page, tables included. HTML entities are unescaped. Comments vanish.
- `<br>`, `<hr>` and list items are line breaks: cell text keeps them as "\\n" (Google's released
  corpus has "2013\\n(1st)"); prose turns them into spaces. Other whitespace collapses to one space.
- Templates vanish, except the whitelist below, which give the text they render (their arguments
  rendered in turn, so nested templates work):

  - nowrap, nobr, small, smaller, big, larger, nobold, noitalic, center, sup, sub, abbr, tooltip,
    math, mvar, url, bartable, ipa, val, longitem, marriage, nastaliq, start-date, end-date: their
    first argument; ill: its `lt=`, else its first argument;
  - resize, sort, lang, transl, color, font color, native name, lang-xx: their last positional
    argument;
  - sortname: "First Last";
  - flag, flagcountry, flagu, flagathlete: their first argument as written (a name or a code);
    flagicon and flagdeco, like every template not listed here: "";
  - yes, no, won, nom, n/a, partial, tba, tbd, dunno, pending: "Yes", "No", "Won", "Nominated",
    ..., or their argument when they have one;
  - nbsp, spaces, ndash, mdash, snd, spaced ndash, dot, middot, bullet, !, =, ': the character
    they stand for;
  - nts and the parser function formatnum: the number with thousands separators ("10,056");
    the parser functions lc, uc, lcfirst, ucfirst: their argument, case changed; every other
    parser function (#if, #expr, #invoke, ...): "";
  - dts, start date, end date, birth date, death date, their "and age" forms, film date:
    "May 1, 1960" ("1 May 1960" with df=y or format=dmy); the age is left out;
  - convert: value and unit as written ("10 km", "10 to 20 km"), without the converted value;
  - frac: "1/2", "3 1/2"; hlist: items joined by ", ";
  - ubl, unbulleted list, bulleted list, plainlist, flatlist, ordered list, vunblist, collapsible
    list: items on separate lines.
"""

import re
from typing import Callable, Dict, List, Optional

from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

# A line break that survives whitespace collapsing (cells keep it as "\n").
BREAK = "\x00"

DROPPED_TAGS = frozenset({
    "ref", "references", "gallery", "math", "chem", "ce", "timeline", "score", "graph", "imagemap",
    "templatedata", "templatestyles", "mapframe", "maplink", "includeonly", "section", "table",
    "syntaxhighlight", "source", "hiero", "indicator", "inputbox", "categorytree",
})
BREAK_TAGS = frozenset({"br", "hr", "li", "dt", "dd", "p"})
DROPPED_LINK_PREFIXES = frozenset({"file", "image", "category"})
_INTERLANGUAGE = re.compile(r"[a-z]{2,3}(-[a-z]{2,8})*$")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_STYLE_QUOTES = re.compile(r"'{2,}")
_SPACES = re.compile(r"\s+")
_EMPTY_BRACKETS = re.compile(r"\s*\([\s;,]*\)")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")

FIRST_ARGUMENT = frozenset({
    "nowrap", "nobr", "small", "smaller", "big", "larger", "nobold", "noitalic", "center", "centre", "sup",
    "sub", "abbr", "tooltip", "math", "mvar", "url", "flag", "flagcountry", "flagu", "flagathlete",
    "bartable", "ipa", "val", "longitem", "marriage", "nastaliq", "start-date", "end-date",
})
LAST_POSITIONAL = frozenset({"resize", "sort", "lang", "transl", "color", "colour", "font color",
                             "native name"})
CONSTANTS = {
    "nbsp": " ", "ndash": "–", "mdash": "—", "snd": " – ", "spaced ndash": " – ", "spaced mdash": " — ",
    "dot": " · ", "·": " · ", "middot": "·", "!": "|", "=": "=", "'": "'", "bullet": " • ",
    "spaces": " ",
}
# Cell templates of comparison and awards tables; an argument replaces their word.
STATUS = {
    "yes": "Yes", "no": "No", "won": "Won", "nom": "Nominated", "n/a": "N/A", "na": "N/A",
    "partial": "Partial", "tba": "TBA", "tbd": "TBD", "dunno": "?", "pending": "Pending",
}
DATES = frozenset({
    "dts", "start date", "end date", "birth date", "death date", "birth date and age", "death date and age",
    "start date and age", "end date and age", "film date",
})
LINE_LISTS = frozenset({"ubl", "unbulleted list", "bulleted list", "plainlist", "plain list", "flatlist",
                        "ordered list", "vunblist", "collapsible list"})
OTHERS = frozenset({"ill", "sortname", "nts", "formatnum", "convert", "frac", "hlist"})
RANGE_WORDS = frozenset({"-", "–", "to", "and", "or", "by", "x", "×", "to(-)", "and(-)", "+/-", "±"})
RENDERED = FIRST_ARGUMENT | LAST_POSITIONAL | DATES | LINE_LISTS | OTHERS | set(CONSTANTS) | set(STATUS)


def template_name(template: Template) -> str:
    """The normalised name: "Infobox_person <!-- c -->" -> "infobox person"."""
    raw = "".join(str(node) for node in template.name.nodes if isinstance(node, Text))
    name = _SPACES.sub(" ", raw.replace("_", " ")).strip().lower()
    return name[len("template:"):].strip() if name.startswith("template:") else name


def _arguments(template: Template) -> Dict[str, Wikicode]:
    return {str(param.name).strip().lower(): param.value for param in template.params}


def _positional(template: Template) -> List[Wikicode]:
    """Arguments 1, 2, ... (given as `|x` or `|1=x`), in order, up to the first missing number."""
    arguments, found = _arguments(template), []
    while str(len(found) + 1) in arguments:
        found.append(arguments[str(len(found) + 1)])
    return found


def _date_text(values: List[str], arguments: Dict[str, str]) -> str:
    """Year, month, day (or one "YYYY-MM-DD") as a date template shows them."""
    if len(values) == 1 and re.fullmatch(r"\d{1,4}(-\d{1,2}){1,2}", values[0]):
        values = values[0].split("-")
    year, month, day = (values + ["", "", ""])[:3]
    if not year.isdigit():
        return " ".join(value for value in values if value)
    if month.isdigit() and 1 <= int(month) <= 12:
        month = MONTHS[int(month) - 1]
    elif month and month.capitalize()[:3] not in [name[:3] for name in MONTHS]:
        return " ".join(value for value in values if value)
    month = month.capitalize()
    day = str(int(day)) if day.isdigit() else ""
    dmy = arguments.get("df", "").lower() in ("y", "yes") or arguments.get("format", "").lower() == "dmy"
    if not month:
        return year
    if not day:
        return f"{month} {year}"
    return f"{day} {month} {year}" if dmy else f"{month} {day}, {year}"


def _convert_text(values: List[str]) -> str:
    """{{convert|10|km|mi}} -> "10 km"; {{convert|10|to|20|km}} -> "10 to 20 km"."""
    if len(values) >= 4 and values[1] in RANGE_WORDS:
        return f"{values[0]} {values[1]} {values[2]} {values[3]}"
    return " ".join(values[:2])


def _frac_text(values: List[str]) -> str:
    if len(values) == 3:
        return f"{values[0]} {values[1]}/{values[2]}"
    if len(values) == 2:
        return f"{values[0]}/{values[1]}"
    return f"1/{values[0]}" if values else ""


def _format_number(text: str) -> str:
    """{{formatnum:1234567.5}} -> "1,234,567.5"; text that is not a plain number stays as it is."""
    found = re.fullmatch(r"(-?)(\d+)(\.\d+)?", text.strip())
    if not found:
        return text.strip()
    sign, whole, fraction = found.groups()
    return f"{sign}{int(whole):,}{fraction or ''}"


def _parser_function_text(template: Template, render: Callable[[Wikicode], str]) -> str:
    """`{{formatnum:x}}`, `{{lc:x}}`, `{{uc:x}}`, `{{lcfirst:x}}`, `{{ucfirst:x}}`; others ("#if:",
    "#expr:", "#invoke:", ...) need MediaWiki to evaluate them and give ""."""
    function, _, argument = render(template.name).partition(":")
    function, argument = function.strip().lower(), argument.strip()
    if function == "formatnum":
        return _format_number(argument)
    transforms = {"lc": str.lower, "uc": str.upper, "lcfirst": lambda t: t[:1].lower() + t[1:],
                  "ucfirst": lambda t: t[:1].upper() + t[1:]}
    return transforms[function](argument) if function in transforms else ""


def _template_text(template: Template, render: Callable[[Wikicode], str]) -> str:
    """The text a template renders, by the module's whitelist ("" for every other template)."""
    name = template_name(template)
    if ":" in name:
        return _parser_function_text(template, render)
    if name not in RENDERED and not name.startswith("lang-"):
        return ""  # Why first: rendering the arguments of every citation template costs time.
    if name in CONSTANTS:
        return CONSTANTS[name]
    values = [render(value).strip() for value in _positional(template)]
    if name in STATUS:
        return values[0] if values and values[0] else STATUS[name]
    if name in FIRST_ARGUMENT:
        return values[0] if values else ""
    if name == "ill":
        label = _arguments(template).get("lt")
        return render(label).strip() if label is not None else (values[0] if values else "")
    if name in LAST_POSITIONAL or name.startswith("lang-"):
        return values[-1] if values else ""
    if name == "sortname":
        return " ".join(value for value in values[:2] if value)
    if name in DATES:
        arguments = {key: render(value).strip() for key, value in _arguments(template).items()}
        return _date_text(values[:3], arguments)
    if name in ("nts", "formatnum"):
        return _format_number(values[0]) if values else ""
    if name == "convert":
        return _convert_text(values)
    if name == "frac":
        return _frac_text(values)
    if name == "hlist":
        return ", ".join(value for value in values if value)
    return BREAK + BREAK.join(values) + BREAK  # LINE_LISTS


def _link_text(link: Wikilink, render: Callable[[Wikicode], str]) -> str:
    title = str(link.title).strip()
    prefix = title.split(":", 1)[0].strip().lower() if ":" in title else None
    if prefix is not None and (prefix in DROPPED_LINK_PREFIXES or _INTERLANGUAGE.match(prefix)):
        return ""  # An image, a category or an interlanguage link shows no text in place.
    if link.text is not None and str(link.text).strip():
        return render(link.text)
    return title.lstrip(":")


def _external_link_text(link: ExternalLink, render: Callable[[Wikicode], str]) -> str:
    """`[http://x label]` -> "label"; `[http://x]` shows a number, not text -> ""; a bare URL -> itself."""
    if link.title is not None:
        return render(link.title)
    return "" if link.brackets else str(link.url)


def _tag_text(tag: Tag, render: Callable[[Wikicode], str]) -> str:
    name = str(tag.tag).strip().lower()
    if name in DROPPED_TAGS:
        return ""
    inner = render(tag.contents) if tag.contents is not None and not tag.self_closing else ""
    if name in BREAK_TAGS:
        return BREAK + inner
    return inner


def _quotes_text(run: re.Match) -> str:
    """A run of apostrophes as MediaWiki shows it: runs of 2, 3 and 5 are markup, a run of 4 is an
    apostrophe before bold, longer runs keep their extra apostrophes."""
    length = len(run.group())
    return "'" if length == 4 else "'" * max(0, length - 5)


def render(code: Optional[Wikicode]) -> str:
    """The raw text of `code`: line breaks of the markup are `BREAK`, source whitespace is kept."""
    if code is None:
        return ""
    parts = []
    for node in code.nodes:
        if isinstance(node, Text):
            parts.append(_STYLE_QUOTES.sub(_quotes_text, _MAGIC_WORD.sub("", node.value)))
        elif isinstance(node, Wikilink):
            parts.append(_link_text(node, render))
        elif isinstance(node, Template):
            parts.append(_template_text(node, render))
        elif isinstance(node, Tag):
            parts.append(_tag_text(node, render))
        elif isinstance(node, HTMLEntity):
            parts.append(node.normalize())
        elif isinstance(node, ExternalLink):
            parts.append(_external_link_text(node, render))
        elif isinstance(node, Heading):
            parts.append(render(node.title))
        elif isinstance(node, Argument):
            parts.append(render(node.default) if node.default is not None else "")
        elif not isinstance(node, Comment):
            parts.append(str(node))
    return "".join(parts)


def clean_cell(raw: str) -> str:
    """Raw rendered text as a cell: markup line breaks kept as "\\n", other whitespace collapsed."""
    lines = (_SPACES.sub(" ", part).strip() for part in raw.split(BREAK))
    return "\n".join(line for line in lines if line)


def cell_text(code: Optional[Wikicode]) -> str:
    """The plain text of a table cell or an infobox value."""
    return clean_cell(render(code))


def _clean_prose(text: str) -> str:
    # Why: pronunciation and citation templates leave "Aruba ( ; ) is" behind when they vanish.
    return _SPACES.sub(" ", _EMPTY_BRACKETS.sub("", text)).strip()


def paragraphs(raw: str) -> List[str]:
    """Raw rendered text as paragraphs (split at blank source lines), whitespace collapsed and
    brackets left empty by vanished templates removed."""
    blocks = re.split(r"\n[ \t]*\n", raw.replace(BREAK, "\n"))
    return [text for text in (_clean_prose(block) for block in blocks) if text]


def prose(raw: str) -> str:
    """Raw rendered text as one line of words (as `paragraphs`, joined)."""
    return _clean_prose(raw.replace(BREAK, " "))
