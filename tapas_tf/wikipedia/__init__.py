"""Stage 1b, Wikipedia: tables and the text around them, from dumps and rendered pages, as Interactions.

Holds the streaming reader of MediaWiki `pages-articles` XML dumps, multistream byte ranges
included (`dump_reader`; which wiki a dump is, as its URL prefix, in `wiki_urls`); table and
infobox extraction from wikitext with a real MediaWiki parser (`wikitext_tables`,
mwparserfromhell; markup to plain text in `wikitext_text`; tables and infoboxes never closed
mended first in `wikitext_repair`); the same from rendered article HTML with a real HTML parser
(`html_pages` reads the files, `html_tables` extracts, `html_text` gives cell and paragraph text;
lxml); the rules both share (`table_grid`: colspan and rowspan expanded, a header row required,
at most 500 cells, empty rows and columns dropped, infoboxes transposed); and
`pretrain_interactions`, which writes a table and its text snippets as an Interaction in the
format of Google's released pre-training corpus. Every table found is extracted or rejected with
a reason from a fixed set, which the Beam job counts, and so is every markup repair.

May import: `tapas_tf.data`.
"""
