"""Runs every Unicode code point through the components of Hugging Face
tokenizers (bin/venv-tok, pinned in hack/requirements-tokenizers.txt) and
writes what they did, as JSON: the sets of code points each class of its
regex engine (Oniguruma) matches, each predicate of its pre-tokenizers and
normalizers holds for, and the characters its normalizers map. The Go
generator (hack/tokgen/main.go) turns this into the tables of
sidecar/tokenizer/tables.go, so that the Go tokenizer sees Unicode as the
pinned tokenizers sees it, whatever Unicode version Go's own tables have.

  probe.py PAIRS.json OUT.json

PAIRS.json holds the pairs Go's NFC composes (go run ./hack/tokgen pairs):
tokenizers' NFC of each is recorded, so that a pair it does not compose
(a character Unicode 9.0 lacked) is known.

Nothing here is written by hand from the Unicode data: each set is what a
component of tokenizers did to the code points.
"""

import json
import os
import sys
import tempfile

import regex
import sentencepiece
from sentencepiece import sentencepiece_model_pb2

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

# Every scalar value (Rust strings hold no surrogates).
ALL = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
TEXT = "".join(map(chr, ALL))

# The classes a tokenizer.json regex may name (Oniguruma's \p{..} general
# categories and the escapes \s, \w, \d).
CATEGORIES = ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No", "P", "Pc", "Pd", "Ps", "Pe",
              "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Co", "Cn"]
# The scripts a tokenizer.json regex may name (those of the model families'
# patterns, and the writing systems they are trained on).
SCRIPTS = ["Han", "Hiragana", "Katakana", "Hangul", "Latin", "Greek", "Cyrillic", "Arabic", "Hebrew", "Thai", "Devanagari"]
ESCAPES = {"s": r"\s", "w": r"\w", "d": r"\d", "h": r"\h"}


def ranges(points: set[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for c in sorted(points):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def removed_by(pre: pre_tokenizers.PreTokenizer) -> list[list[int]]:
    """The code points a pre-tokenizer removes from the text of them all,
    as ranges: what lies outside the pieces it keeps (their offsets are
    indexes into ALL)."""
    out: list[list[int]] = []
    at = 0

    def removed(lo: int, hi: int) -> None:  # ALL[lo:hi] were removed
        if lo >= hi:
            return
        a, b = ALL[lo], ALL[hi - 1]
        if b - a == hi - 1 - lo:
            out.append([a, b])
        else:  # across the surrogates' gap
            gap = ALL.index(0xE000, lo, hi)
            out.extend([[a, ALL[gap - 1]], [0xE000, b]])

    for _, (start, end) in pre.pre_tokenize_str(TEXT):
        removed(at, start)
        at = end
    removed(at, len(ALL))
    return out


def regex_class(pattern: str) -> list[list[int]]:
    return removed_by(pre_tokenizers.Split(Regex(pattern), behavior="removed"))


def per_char(normalize, probe=lambda c: c, sep: str = "\x00") -> dict[int, str]:
    """Each code point's probe through normalize, separated by sep (a
    starter that no code point maps to, and the normalizer keeps); sep
    itself alone."""
    chunks = [probe(chr(c)) for c in ALL if chr(c) != sep]
    out = normalize(sep.join(chunks)).split(sep)
    if len(out) != len(chunks):
        raise SystemExit(f"the separator was changed by {normalize}")
    res = {c: o for c, o in zip((c for c in ALL if chr(c) != sep), out)}
    res[ord(sep)] = normalize(probe(sep))
    return res


def changed(normalize, probe=lambda c: c) -> dict[str, str]:
    return {str(c): o for c, o in per_char(normalize, probe).items() if o != probe(chr(c))}


BERT_SEP = "|"  # BERT's cleaning drops \x00


def isolated_by(pre: pre_tokenizers.PreTokenizer) -> set[int]:
    """The code points a pre-tokenizer isolates between two a's."""
    out = set()
    for c in ALL:
        if chr(c) == "a":
            continue
        pieces = [p for p, _ in pre.pre_tokenize_str("a" + chr(c) + "a")]
        if pieces == ["a", chr(c), "a"]:
            out.add(c)
    return out


def charsmap(rules: dict[str, str]) -> bytes:
    """A SentencePiece normalization charsmap of the rules (each string to
    its replacement), as sentencepiece's trainer compiles it."""
    with tempfile.TemporaryDirectory() as d:
        tsv, corpus = os.path.join(d, "rules.tsv"), os.path.join(d, "corpus.txt")
        with open(tsv, "w", encoding="utf-8") as f:
            for k, v in rules.items():
                f.write(" ".join(f"{ord(c):X}" for c in k) + "\t" + " ".join(f"{ord(c):X}" for c in v) + "\n")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("hello world abc\n" * 200)
        sentencepiece.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "m"), vocab_size=15,
                                                 normalization_rule_tsv=tsv, minloglevel=2)
        m = sentencepiece_model_pb2.ModelProto()
        with open(os.path.join(d, "m.model"), "rb") as f:
            m.ParseFromString(f.read())
        return m.normalizer_spec.precompiled_charsmap


def graphemes() -> dict[str, object]:
    """The grapheme cluster breaks tokenizers' Precompiled normalizer
    sees (it looks a cluster of under 6 bytes up whole): what joins a
    cluster after "a" (Extend, ZWJ, SpacingMark), before "a" (Prepend),
    and what a combining mark does not join (Control, CR, LF, among the
    characters of at most 3 bytes: longer ones make clusters of 6 bytes or
    more, looked up a character at a time). The Hangul, regional
    indicator, emoji and Indic conjunct properties are the regex
    module's."""
    a = normalizers.Precompiled(charsmap({"a": "X"}))
    joins_after, joins_before = set(), set()
    for c in ALL:
        ch = chr(c)
        if ch == "a" or ch == "X":
            continue
        if a.normalize_str("a" + ch) == "X":
            joins_after.add(c)
        if a.normalize_str(ch + "a\u0301") == ch + "X\u0301":
            joins_before.add(c)
    # Each character of at most 3 bytes its own rule, but the mark, the
    # rule's target and the trainer's corpus (letters, which are no
    # controls).
    short = [c for c in ALL if len(chr(c).encode()) <= 3 and c != 0 and chr(c) not in "\u0301\t\n\r Yhelowrdabc"]
    each = normalizers.Precompiled(charsmap({chr(c): "Y" for c in short}))
    breaks = {c for c in short if each.normalize_str(chr(c) + "\u0301") == "Y\u0301"}
    # NUL, tab, LF and CR cannot be rules of the TSV: the regex module's.
    breaks |= {c for c in (0x0, 0x9, 0xA, 0xD) if regex.match(r"\p{GCB=Control}|\p{GCB=CR}|\p{GCB=LF}", chr(c))}
    out = {"extend": ranges(joins_after), "prepend": ranges(joins_before), "control": ranges(breaks)}
    # The rest join only characters of 3 bytes or more, in clusters whose
    # length decides whether they are looked up whole: the regex module's.
    for name, prop in [("pictographic", "Extended_Pictographic"), ("hangul_l", "GCB=L"), ("hangul_v", "GCB=V"), ("hangul_t", "GCB=T"),
                       ("hangul_lv", "GCB=LV"), ("hangul_lvt", "GCB=LVT"), ("regional", "GCB=Regional_Indicator"),
                       ("incb_consonant", "InCB=Consonant"), ("incb_linker", "InCB=Linker"), ("incb_extend", "InCB=Extend")]:
        pat = regex.compile(r"\p{" + prop + "}")
        out[name] = ranges({c for c in ALL if pat.match(chr(c))})
    return out


def main() -> None:
    out: dict[str, object] = {"tokenizers": tokenizers.__version__}
    classes = {}
    for cat in CATEGORIES:
        classes["p{" + cat + "}"] = regex_class(r"\p{" + cat + "}")
    for script in SCRIPTS:
        classes["p{" + script + "}"] = regex_class(r"\p{" + script + "}")
    for name, pattern in ESCAPES.items():
        classes[name] = regex_class(pattern)
        # Inside brackets Oniguruma's \w is another class ([\w] lacks ²).
        classes["[" + name + "]"] = regex_class("[" + pattern + "]")
    for cat in CATEGORIES + SCRIPTS:
        inside = regex_class(r"[\p{" + cat + "}]")
        if inside != classes["p{" + cat + "}"]:
            classes["[p{" + cat + "}]"] = inside
    out["regex"] = classes

    bert_clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    cleaned = per_char(bert_clean.normalize_str, sep=BERT_SEP)
    out["bert_dropped"] = ranges({c for c, o in cleaned.items() if o == ""})
    out["bert_space"] = ranges({c for c, o in cleaned.items() if o == " " and c != 0x20})
    bert_strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    nfd = per_char(normalizers.NFD().normalize_str)
    stripped = per_char(bert_strip.normalize_str, sep=BERT_SEP)
    # A code point its own NFD that BERT's accent stripping drops.
    out["bert_accent"] = ranges({c for c, o in stripped.items() if o == "" and nfd[c] == chr(c)})
    strip_accents = per_char(normalizers.StripAccents().normalize_str)
    out["combining_mark"] = ranges({c for c, o in strip_accents.items() if o == ""})
    out["lowercase"] = changed(normalizers.Lowercase().normalize_str)
    forms = {}
    for name, form in [("NFD", normalizers.NFD()), ("NFKD", normalizers.NFKD()), ("NFC", normalizers.NFC()), ("NFKC", normalizers.NFKC())]:
        forms[name] = changed(form.normalize_str)
    # Reordering shows a canonical combining class: U+0334 has class 1 and
    # U+0345 class 240, the lowest and the highest.
    nfd = per_char(normalizers.NFD().normalize_str)
    after = per_char(normalizers.NFD().normalize_str, lambda c: c + "\u0334")
    before = per_char(normalizers.NFD().normalize_str, lambda c: "\u0345" + c)
    forms["after_0334"] = sorted(c for c, o in after.items() if o != nfd[c] + "\u0334")
    forms["before_0345"] = sorted(c for c, o in before.items() if o != "\u0345" + nfd[c])
    with open(sys.argv[1], encoding="utf-8") as f:
        pairs = json.load(f)
    nfc = normalizers.NFC()
    forms["pairs"] = [{"pair": p, "tokenizers": nfc.normalize_str(p[0] + p[1])} for p in pairs]
    out["normalization"] = forms

    out["punctuation"] = removed_by(pre_tokenizers.Punctuation(behavior="removed"))
    out["whitespace_split"] = removed_by(pre_tokenizers.WhitespaceSplit())
    out["numeric"] = ranges(isolated_by(pre_tokenizers.Digits(individual_digits=True)))
    # Whitespace's \w+|[^\w\s]+ (the regex crate): word characters come
    # out alone between two "!", spaces are dropped.
    word, space = set(), set()
    ws = pre_tokenizers.Whitespace()
    for c in ALL:
        pieces = [p for p, _ in ws.pre_tokenize_str("!" + chr(c) + "!")]
        if pieces == ["!", chr(c), "!"]:
            word.add(c)
        elif pieces == ["!", "!"]:
            space.add(c)
    out["word"] = ranges(word)
    out["space"] = ranges(space)
    out["graphemes"] = graphemes()
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, sort_keys=True, separators=(",", ":"))


if __name__ == "__main__":
    main()
