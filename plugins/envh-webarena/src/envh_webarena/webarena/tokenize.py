"""NLTK's ``word_tokenize`` as WebArena's ``must_include`` uses it, without NLTK.

WebArena (``evaluation_harness/evaluators.py``, ``StringEvaluator.must_include``) checks a
one-character reference against ``nltk.word_tokenize(pred)``: Punkt splits the text into
sentences, then ``NLTKWordTokenizer`` splits each sentence. The word tokenizer below is
NLTK's own regexes (``nltk/tokenize/destructive.py``); the sentence splitter is
``PunktSentenceTokenizer.tokenize`` (``nltk/tokenize/punkt.py``, NLTK 3.10.4: its period
context, word segmentation, both annotation passes and boundary realignment) with the
English ``punkt_tab`` model reduced to what lower-cased text can reach: the abbreviation
types, the collocations, and the words whose orthographic context leaves the heuristic
"unknown" when they follow a number or an initial in lower case (every other lower-case
word is "not a sentence starter"). ``clean_answer`` lower-cases the text first; a token
that still starts with an upper-case letter (a few symbols ``str.lower`` keeps, such as
``ℂ``) would need the model's full orthographic table, so ``word_tokenize`` raises
``AmbiguousBoundary`` there and the caller refuses the match. NLTK compiles its patterns
with the ``regex`` engine, so white space here is Unicode's White_Space as there; word
characters and word boundaries are ``re``'s, which differ from ``regex``'s on combining
marks and non-decimal digits (``²``, ``½``) only.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

# NLTK compiles its patterns with the ``regex`` engine (``nltk.redos``), whose ``\s`` is
# Unicode's White_Space: not the separators U+001C..U+001F that ``re``'s ``\s`` also takes
_WS = "[\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_NWS = "[^\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"

_STARTING_QUOTES = [
    (re.compile("([«“‘„]|[`]+)"), r" \1 "),
    (re.compile(r"^\""), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
    (re.compile(r"(?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)"), r"\1 "),
]
_ENDING_QUOTES = [
    (re.compile("([»”’])"), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(rf"{_WS}+"), " "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_PUNCTUATION = [
    (re.compile(rf'([^\.])(\.)([\]\)}}>"\'»”’ ]*){_WS}*$'), r"\1 \2 \3 "),
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"[\u2012-\u2015]"), r" \g<0> "),
    (re.compile(rf'([^\.])(\.)([\]\)}}>"\']*){_WS}*$'), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]"), r" \g<0> "),
]
_PARENS_BRACKETS = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DOUBLE_DASHES = (re.compile(r"--"), r" -- ")
_CONTRACTIONS = [re.compile(p) for p in (
    r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b",
    r"(?i)\b(gon)(?#X)(na)\b", r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b",
    r"(?i)\b(more)(?#X)('n)\b", r"(?i)\b(wan)(?#X)(na)(?=" + _WS + ")",
    r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b")]

def _treebank(sentence: str) -> list[str]:
    """``NLTKWordTokenizer().tokenize(sentence)``."""
    text = sentence
    for regexp, sub in _STARTING_QUOTES + _PUNCTUATION + [_PARENS_BRACKETS, _DOUBLE_DASHES]:
        text = regexp.sub(sub, text)
    text = f" {text} "
    for regexp, sub in _ENDING_QUOTES:
        text = regexp.sub(sub, text)
    for regexp in _CONTRACTIONS:
        text = regexp.sub(r" \1 \2 ", text)
    return text.split()


# -- Punkt (nltk/tokenize/punkt.py, NLTK 3.10.4) with the English punkt_tab model --------
ABBREV_TYPES = frozenset({
    ". . ", "a.a", "a.c", "a.d", "a.g", "a.h", "a.m", "a.m.e", "a.s", "a.t", "adm", "ala", "ariz", "aug", "ave",
    "b.f", "b.v", "bros", "c", "c.i.t", "c.o.m.b", "c.v", "calif", "chg", "cie", "co", "col", "colo", "conn",
    "corp", "cos", "ct", "d", "d.c", "d.h", "d.w", "dec", "dr", "e", "e.f", "e.h", "e.l", "e.m", "f", "f.g",
    "f.j", "feb", "fla", "fri", "ft", "g", "g.d", "g.f", "g.k", "ga", "gen", "h", "h.c", "h.f", "h.m", "i.m.s",
    "ill", "inc", "j.b", "j.c", "j.j", "j.k", "j.p", "j.r", "jan", "jr", "k", "kan", "ky", "l", "l.a", "l.f",
    "l.p", "lt", "ltd", "m", "m.b.a", "m.d.c", "m.j", "maj", "messrs", "mg", "mich", "minn", "mr", "mrs", "ms",
    "n", "n.c", "n.d", "n.h", "n.j", "n.m", "n.v", "n.y", "nev", "nov", "oct", "ok", "okla", "ore", "p",
    "p.a.m", "p.m", "pa", "ph.d", "prof", "r", "r.a", "r.h", "r.i", "r.j", "r.k", "r.t", "rep", "reps", "s",
    "s.a", "s.a.y", "s.c", "s.g", "s.p.a", "s.s", "sen", "sep", "sept", "sr", "st", "sw", "t", "t.j", "tenn",
    "tues", "u.k", "u.n", "u.s", "u.s.a", "u.s.s.r", "v", "va", "vs", "vt", "w", "w.c", "w.r", "w.va", "w.w",
    "wash", "wed", "wis", "yr"})
COLLOCATIONS = frozenset({("##number##", w) for w in (
    "abreast", "aes", "business", "cbot", "colgate", "commodities", "cooper", "corrections", "credit",
    "dividend", "financing", "genentech", "henley", "insider", "international", "leisure", "letters",
    "notable", "pay-fone", "pegasus", "pepper", "review", "rj", "wedgestone", "who", "zimmer")} | {
    ("b", "edelman"), ("b", "levine"), ("b", "smith"), ("b", "stewart"), ("b", "wigton"), ("i", "magnin"),
    ("i", "toussie"), ("j", "aron"), ("j", "fialka"), ("j", "walter"), ("o", "ludcke")})
# the model's types seen starting a sentence in lower case and never upper case: after a
# number or an initial the orthographic heuristic says "unknown" for them (the break stays)
LOWER_SENT_STARTERS = frozenset({"administrators", "b-week", "r-revised", "z-holiday"})

_NON_WORD = r"(?:[)\";}\]\*:@\'\({\[\u2018\u2019\u201c\u201d\xab\xbb?!])"
_MULTI_CHAR = rf"(?:\-{{2,}}|\.{{2,}}|(?:\.{_WS}){{2,}}\.)"
_WORD_START = r"[^\(\"\`{\[:;&\#\*@\)}\]\-,]"
_PUNKT_WORD = re.compile(rf"""(
    {_MULTI_CHAR}
    |
    (?={_WORD_START}){_NWS}+?
    (?={_WS}|$|{_NON_WORD}|{_MULTI_CHAR}|,(?=$|{_WS}|{_NON_WORD}|{_MULTI_CHAR}))
    |
    {_NWS}
)""", re.UNICODE | re.VERBOSE)
_PERIOD_CONTEXT = re.compile(rf"""
    [.?!]
    (?=(?P<after_tok>
        {_NON_WORD}
        |
        {_WS}+(?P<next_tok>{_NWS}+)
    ))""", re.UNICODE | re.VERBOSE)
_REALIGN = re.compile(rf'["\')\]}}\u2018\u2019\u201c\u201d\xab\xbb]+?(?:{_WS}+|(?=--)|$)', re.MULTILINE)
_ELLIPSIS = re.compile(r"\.\.+$")
_NUMERIC = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")
_INITIAL = re.compile(r"[^\W\d]\.$")
_PUNKT_PUNCTUATION = tuple(";:,.!?")


class AmbiguousBoundary(ValueError):
    """A boundary Punkt decides with the parts of its model kept out of lower-cased text."""


@dataclass
class _Token:
    """``PunktToken``: a word of Punkt's segmentation and its annotations."""

    tok: str
    sentbreak: bool = False
    abbr: bool = False
    ellipsis: bool = False

    @property
    def type(self) -> str:
        return _NUMERIC.sub("##number##", self.tok.lower())

    @property
    def type_no_period(self) -> str:
        t = self.type
        return t[:-1] if len(t) > 1 and t[-1] == "." else t

    @property
    def type_no_sentperiod(self) -> str:
        return self.type_no_period if self.sentbreak else self.type


def _first_pass(tok: _Token) -> None:
    text = tok.tok
    if text in (".", "?", "!"):
        tok.sentbreak = True
    elif _ELLIPSIS.match(text):
        tok.ellipsis = True
    elif text.endswith(".") and not text.endswith(".."):
        if text[:-1].lower() in ABBREV_TYPES or text[:-1].lower().split("-")[-1] in ABBREV_TYPES:
            tok.abbr = True
        else:
            tok.sentbreak = True


def _ortho_heuristic(tok: _Token) -> bool | None:
    """Whether ``tok`` starts a sentence: False, or None for "unknown" (True needs an upper-case
    first letter, which lower-cased text does not have)."""
    if tok.tok in _PUNKT_PUNCTUATION:
        return False
    if tok.tok[0].isupper():
        raise AmbiguousBoundary(f"{tok.tok[:20]!r} starts in upper case")
    if tok.tok[0].islower() and tok.type_no_sentperiod not in LOWER_SENT_STARTERS:
        return False
    return None


def _second_pass(tok1: _Token, tok2: _Token) -> None:
    if not tok1.tok.endswith("."):
        return
    typ, next_typ = tok1.type_no_period, tok2.type_no_sentperiod
    initial = bool(_INITIAL.match(tok1.tok))
    if (typ, next_typ) in COLLOCATIONS:
        tok1.sentbreak, tok1.abbr = False, True
        return
    if (tok1.abbr or tok1.ellipsis) and not initial:
        _ortho_heuristic(tok2)  # a sentence break needs an upper-case next word
        return
    if (initial or typ == "##number##") and _ortho_heuristic(tok2) is False:
        tok1.sentbreak, tok1.abbr = False, True


def _contains_sentbreak(text: str) -> bool:
    """``PunktSentenceTokenizer.text_contains_sentbreak``: a break before the last token."""
    tokens = [_Token(t) for line in text.split("\n") if line.strip() for t in _PUNKT_WORD.findall(line)]
    for tok in tokens:
        _first_pass(tok)
    for tok1, tok2 in zip(tokens, tokens[1:]):
        _second_pass(tok1, tok2)
    return any(tok.sentbreak for tok in tokens[:-1])


def _end_contexts(text: str) -> list[tuple[re.Match[str], str]]:
    """``_match_potential_end_contexts``: each candidate end with the word before it and the
    context after it, overlapping candidates dropped."""
    out: list[tuple[re.Match[str], str]] = []
    prev_slice, prev_match = slice(0, 0), None
    for match in _PERIOD_CONTEXT.finditer(text):
        before = text[prev_slice.stop:match.start()]
        last_space = next((i for i in range(len(before) - 1, -1, -1) if before[i] in string.whitespace), 0)
        start = last_space + prev_slice.stop + 1 if last_space else prev_slice.start
        word = slice(start, match.start())
        if prev_match is not None and prev_slice.stop <= word.start:
            out.append((prev_match, text[prev_slice] + prev_match.group() + prev_match.group("after_tok")))
        prev_match, prev_slice = match, word
    if prev_match is not None:
        out.append((prev_match, text[prev_slice] + prev_match.group() + prev_match.group("after_tok")))
    return out


def _slices(text: str) -> list[slice]:
    out, last_break = [], 0
    for match, context in _end_contexts(text):
        if _contains_sentbreak(context):
            out.append(slice(last_break, match.end()))
            last_break = match.start("next_tok") if match.group("next_tok") else match.end()
    out.append(slice(last_break, len(text.rstrip())))
    return out


def _realign(text: str, slices: list[slice]) -> list[slice]:
    out, realign = [], 0
    for i, s1 in enumerate(slices):
        s1 = slice(s1.start + realign, s1.stop)
        if i + 1 == len(slices):
            if text[s1]:
                out.append(s1)
            continue
        s2 = slices[i + 1]
        m = _REALIGN.match(text[s2])
        if m:
            out.append(slice(s1.start, s2.start + len(m.group(0).rstrip())))
            realign = m.end()
        else:
            realign = 0
            if text[s1]:
                out.append(s1)
    return out


def sentences(text: str) -> list[str]:
    """``PunktSentenceTokenizer.tokenize`` with the English model, for lower-cased text."""
    return [text[s] for s in _realign(text, _slices(text))]


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` for lower-cased text (``AmbiguousBoundary`` where that is not enough)."""
    return [tok for sent in sentences(text) for tok in _treebank(sent)]
