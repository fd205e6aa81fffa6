"""A corpus of real English prose for bench_search.py's `--corpus`, from Debian's documentation packages: one text
a line, each a short note (a sentence, or two short ones: 40 to 280 characters), deduplicated and shuffled.

    apt-get install -y --no-install-recommends wordnet-base dict-gcide linux-doc-6.1 python3.11-doc \
        perl-doc emacs-common
    .venv/bin/python bench/corpus_debian.py var/bench/corpus.txt

Sources (what is installed of them): WordNet's glosses (~117,000 definitions with their examples), the GNU
Collaborative International Dictionary of English (GCIDE: Webster's 1913 and WordNet), and the Linux kernel's
documentation, Python's and Perl's, and the Info manuals (GNU's tools'): their prose paragraphs, markup and
code left out; the comments and documentation strings of Emacs's Lisp sources; the installed packages'
changelogs and manual pages. Memory content is mostly short
notes in natural language; these are natural language of several registers (definitions, quotations, technical
prose), which is what a semantic embedder's neighbourhoods need and the bench's generated words lack.
"""
from __future__ import annotations

import gzip
import random
import re
import sys
import textwrap
from pathlib import Path

WORDNET = Path("/usr/share/wordnet")
GCIDE = Path("/usr/share/dictd/gcide.dict.dz")
KERNEL = Path("/usr/share/doc/linux-doc-6.1/Documentation")
PYTHON = Path("/usr/share/doc/python3.11/html/_sources")
PERL = Path("/usr/share/perl")
INFO = Path("/usr/share/info")
EMACS = Path("/usr/share/emacs")
DOC = Path("/usr/share/doc")
MAN = Path("/usr/share/man")
_TROFF = re.compile(r"\\f[BIRP]|\\f\(..|\\[(*].{1,2}|\\&|\\-|\\e")
SHORTEST, LONGEST = 40, 280
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"^\s*(\.\.|::|[=\-~^*#+`]{3,}|\||\+[-=]|:[A-Za-z ]+:\s*$)")
_PROSE = re.compile(r"^[A-Za-z\"'(]")
_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?: <[^>]*>)?`|``([^`]*)``|`([^`<]*?)(?: <[^>]*>)?`_{0,2}|\*\*?([^*]+)\*\*?")


def _notes(paragraph: str):
    """A paragraph's sentences, each a note (a short one joined to the next, up to LONGEST characters)."""
    note = ""
    for sentence in _SENTENCE_END.split(_SPACE.sub(" ", paragraph).strip()):
        if note and len(note) + 1 + len(sentence) > LONGEST:
            yield note
            note = ""
        note = f"{note} {sentence}".strip()
        if len(note) >= SHORTEST:
            yield note
            note = ""
    if note:
        yield note


def wordnet():
    for part in ("noun", "verb", "adj", "adv"):
        path = WORDNET / f"data.{part}"
        if not path.exists():
            continue
        for line in path.read_text(encoding="latin-1").splitlines():
            if line.startswith(" ") or " | " not in line:
                continue
            fields, gloss = line.split(" | ", 1)
            word = fields.split()[4].replace("_", " ")
            yield f"{word}: {gloss.strip()}"


def gcide():
    if not GCIDE.exists():
        return
    text = gzip.decompress(GCIDE.read_bytes()).decode("utf-8", "replace")
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.splitlines()]
        body = " ".join(line for line in lines if line and not line.startswith(("[", "{", "Syn.", "--")))
        if _PROSE.match(body):
            yield from _notes(body)


def _prose(root: Path, suffixes: tuple[str, ...]):
    """The prose paragraphs of the text files under `root` (reStructuredText, POD, Info; gzipped or not),
    reStructuredText's inline markup reduced to its text; code, tables, lists and directives left out."""
    if not root.exists():
        return
    for path in sorted(root.rglob("*")):
        if not path.name.endswith(suffixes) or not path.is_file():
            continue
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for paragraph in re.split(r"\n\s*\n", raw.decode("utf-8", "replace")):
            lines = textwrap.dedent(paragraph).splitlines()
            if not lines or any(_MARKUP.match(line) or line.lstrip()[:2] in ("- ", "* ", ">>", "$ ", "# ")
                                for line in lines):
                continue
            if _PROSE.match(lines[0]) and not lines[0].startswith(("http", "Copyright")):
                yield from _notes(_ROLE.sub(lambda m: next(g for g in m.groups() if g is not None), " ".join(lines)))


def kernel():
    yield from _prose(KERNEL, (".rst", ".rst.gz", ".txt", ".txt.gz"))


def python():
    yield from _prose(PYTHON, (".rst.txt",))


def perl():
    yield from _prose(PERL, (".pod",))


def info():
    """The Info manuals: GNU's tools', and Emacs's and its packages' (emacs-common)."""
    yield from _prose(INFO, (".info.gz",) + tuple(f".info-{i}.gz" for i in range(1, 10)) + (".gz",))


def emacs():
    """The comments and documentation strings of Emacs's Lisp sources (emacs-common): prose by many hands."""
    if not EMACS.exists():
        return
    docstring = re.compile(r'^\s*"((?:[^"\\]|\\.){40,}?)"\s*$', re.MULTILINE | re.DOTALL)
    for path in sorted(EMACS.rglob("*.el.gz")):
        text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        comment: list[str] = []
        for line in text.splitlines() + [""]:
            stripped = line.lstrip()
            if stripped.startswith(";;") and not stripped.startswith(";;;"):
                comment.append(stripped.lstrip("; "))
                continue
            if comment and _PROSE.match(comment[0]):
                yield from _notes(" ".join(comment))
            comment = []
        for match in docstring.finditer(text):
            body = match.group(1).replace('\\"', '"')
            if _PROSE.match(body):
                yield from _notes(body)


def changelogs():
    """The entries of every installed package's changelog (what changed, and why: notes by their maintainers)."""
    for path in sorted(DOC.glob("*/changelog*.gz")):
        entry: list[str] = []
        for line in gzip.decompress(path.read_bytes()).decode("utf-8", "replace").splitlines() + [""]:
            stripped = line.strip()
            if stripped[:2] in ("* ", "- ", "+ ") or not stripped or not line[:1].isspace():
                if entry and _PROSE.match(entry[0]):
                    yield from _notes(" ".join(entry))
                entry = [stripped[2:]] if stripped[:2] in ("* ", "- ", "+ ") else []
            elif entry:
                entry.append(stripped)


def manpages():
    """The text paragraphs of the English manual pages (troff requests and font escapes left out)."""
    for path in sorted(MAN.glob("man[1-8]/*.gz")):
        paragraph: list[str] = []
        for line in gzip.decompress(path.read_bytes()).decode("utf-8", "replace").splitlines() + [".PP"]:
            if line.startswith((".", "'")):
                if paragraph and _PROSE.match(paragraph[0]):
                    yield from _notes(_TROFF.sub("", " ".join(paragraph)))
                paragraph = []
            elif line.strip():
                paragraph.append(line.strip())


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    seen: set[str] = set()
    for source in (wordnet, gcide, kernel, python, perl, info, emacs, changelogs, manpages):
        before = len(seen)
        seen.update(n for n in source() if SHORTEST <= len(n) <= LONGEST and sum(c.isalpha() for c in n) > len(n) / 2)
        print(f"{source.__name__}: {len(seen) - before:,} notes", file=sys.stderr)
    notes = sorted(seen)
    random.Random(20).shuffle(notes)
    out = Path(sys.argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{n}\n" for n in notes), encoding="utf-8")
    print(f"{len(notes):,} notes in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
