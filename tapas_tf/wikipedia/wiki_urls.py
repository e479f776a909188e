"""Which wiki a page comes from, as the prefix of its article URLs (`http://de.wikipedia.org/wiki/`).

Table ids and document URLs are `{article base}{Title}` (`pretrain_interactions.page_url`). A dump
says which wiki it is in its `<siteinfo>` (`<base>https://de.wikipedia.org/wiki/Wikipedia:Hauptseite`,
`<dbname>dewiki`) and its root's `xml:lang` ("de"); a rendered page in its crawl URL. `site_base`
takes the most precise of these: the base URL, else the database name, else the language, else
English Wikipedia.

Wikipedia hosts keep `http://` whatever the dump's base says (enwiki's is `https://`): Google's
released corpus names its tables `http://en.wikipedia.org/wiki/...`, and evaluation tables are
excluded by that id. Other wikis keep the scheme of their base.
"""

import re
import urllib.parse
from typing import Optional

WIKI_BASE = "http://en.wikipedia.org/wiki/"
# Wikimedia database names: language code (underscores for dashes) + project ("dewiki",
# "zh_yuewiki", "frwiktionary").
_PROJECTS = {"wiki": "wikipedia", "wiktionary": "wiktionary", "wikibooks": "wikibooks",
             "wikinews": "wikinews", "wikiquote": "wikiquote", "wikisource": "wikisource",
             "wikiversity": "wikiversity", "wikivoyage": "wikivoyage"}
_DBNAME = re.compile(r"([a-z][a-z_]*?)(" + "|".join(sorted(_PROJECTS, key=len, reverse=True)) + r")")
_LANGUAGE = re.compile(r"[a-z]{2,3}(-[a-z0-9]{2,8})*")


def _wikipedia_http(scheme: str, host: str) -> str:
    return "http" if host.endswith(".wikipedia.org") else scheme


def base_from_url(url: str, any_path: bool = False) -> Optional[str]:
    """The article base of a page URL of a wiki, or None when `url` is not an http(s) URL.

    `https://de.wikipedia.org/wiki/Wikipedia:Hauptseite` -> `http://de.wikipedia.org/wiki/`;
    `http://en.wikipedia.org/wiki?action=render&curid=1` -> `http://en.wikipedia.org/wiki/`;
    `https://wiki.example.org/index.php?title=Main_Page` -> `https://wiki.example.org/index.php?title=`.
    Other URLs give None, unless `any_path` (a dump's `<base>`, which is a wiki page whatever its
    form): `https://wiki.example.org/pages/Main_Page` -> `https://wiki.example.org/pages/`.
    """
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    origin = f"{_wikipedia_http(parts.scheme, parts.netloc)}://{parts.netloc}"
    if parts.path == "/wiki" or parts.path.startswith("/wiki/"):
        return origin + "/wiki/"
    if "title" in urllib.parse.parse_qs(parts.query):
        return f"{origin}{parts.path}?title="
    if not any_path:
        return None
    return origin + parts.path[: parts.path.rfind("/") + 1] if "/" in parts.path else origin + "/"


def base_from_dbname(dbname: str) -> Optional[str]:
    """`dewiki` -> `http://de.wikipedia.org/wiki/`; None for a name that is not a Wikimedia one."""
    found = _DBNAME.fullmatch(dbname.strip().lower())
    if not found:
        return None
    language, project = found.group(1).replace("_", "-"), _PROJECTS[found.group(2)]
    scheme = "http" if project == "wikipedia" else "https"
    return f"{scheme}://{language}.{project}.org/wiki/"


def site_base(base_url: str = "", dbname: str = "", lang: str = "") -> str:
    """The article base of a dump from its `<base>`, `<dbname>` and `xml:lang`, in that order of
    trust (any may be ""); English Wikipedia's when none says anything usable."""
    for found in (base_from_url(base_url, any_path=True) if base_url else None,
                  base_from_dbname(dbname) if dbname else None):
        if found:
            return found
    language = lang.strip().lower()
    if _LANGUAGE.fullmatch(language):
        return f"http://{language}.wikipedia.org/wiki/"
    return WIKI_BASE
