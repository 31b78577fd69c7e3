"""NLTK's ``word_tokenize`` as WebArena's ``must_include`` uses it, without NLTK's data.

WebArena (``evaluation_harness/evaluators.py``, ``StringEvaluator.must_include``) checks a
one-character reference against ``nltk.word_tokenize(pred)``: Punkt splits the text into
sentences, then ``NLTKWordTokenizer`` splits each sentence. The word tokenizer below is
NLTK's own regexes (``nltk/tokenize/destructive.py``, nltk/nltk@07a43d2246c5). Punkt's
English model (``punkt_tab``) is a data download, so the sentence split is Punkt's rule
for text that ``clean_answer`` has lower-cased: a token ending in ``.``, ``?`` or ``!``
followed by a space ends a sentence, except an ellipsis, and a number or an initial
(``3.``, ``b.``) followed by a word that starts in lower case. What the model would add —
its abbreviations and the words it has seen capitalised — only decides whether a
word's final ``.`` is its own token, which a one-character reference never is but ``.``.
"""

from __future__ import annotations

import re

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
    (re.compile(r"\s+"), " "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_PUNCTUATION = [
    (re.compile(r'([^\.])(\.)([\]\)}>"\'»”’ ]*)\s*$'), r"\1 \2 \3 "),
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"[\u2012-\u2015]"), r" \g<0> "),
    (re.compile(r'([^\.])(\.)([\]\)}>"\']*)\s*$'), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]"), r" \g<0> "),
]
_PARENS_BRACKETS = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DOUBLE_DASHES = (re.compile(r"--"), r" -- ")
_CONTRACTIONS = [re.compile(p) for p in (
    r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b",
    r"(?i)\b(gon)(?#X)(na)\b", r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b",
    r"(?i)\b(more)(?#X)('n)\b", r"(?i)\b(wan)(?#X)(na)(?=\s)",
    r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b")]

# Punkt's token classes (nltk/tokenize/punkt.py)
_NUMBER = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")
_INITIAL = re.compile(r"[^\W\d]\.$")
_CANDIDATE = re.compile(r"\S*[.?!](?=\s+(\S+))")  # a possible sentence end and the next token
_OPENERS = "([{<\"'`«“‘„"


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


def _ends_sentence(token: str, next_token: str) -> bool:
    if token.endswith(("?", "!")):
        return True
    word = token.lstrip(_OPENERS)
    if re.search(r"\.\.+$", word):  # an ellipsis: Punkt's orthographic check, never met in lower case
        return False
    if _NUMBER.match(word) or _INITIAL.search(word):
        return not next_token[:1].islower()
    return True


def sentences(text: str) -> list[str]:
    """Punkt's sentence split of lower-cased text (see the module docstring)."""
    out, start = [], 0
    for m in _CANDIDATE.finditer(text):
        if _ends_sentence(m.group(0), m.group(1)):
            out.append(text[start:m.end()].strip())
            start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` for lower-cased text."""
    return [tok for sent in sentences(text) for tok in _treebank(sent)]
