"""Tokenizers trained and run by tokenizers, the Hugging Face library itself
(bin/venv-tok), for the tests of shardfeed's Go tokenizer
(sidecar/tokenizer): every tokenizer.json is trained here at test time on
a corpus made here, never vendored.

  tokenizers_oracle.py corpus FILE [--rows N] [--ids] [--seed S]
      writes FILE: N texts as JSON lines, {"text": ...} (with --ids,
      {"id": row, "text": ...}: a stream of them; another seed, other
      texts), that exercise
      Unicode (CJK, emoji and their joiners, combining marks, right-to-left
      scripts, control characters, runs of whitespace and newlines, text
      decoded from invalid UTF-8 with its replacement characters,
      contractions, digits, added tokens in the text).
  tokenizers_oracle.py train KIND CORPUS OUT [--special T1,T2,...]
      trains a tokenizer of KIND on CORPUS's texts and saves OUT (a
      tokenizer.json), as the models that use it build theirs (and adds
      the special tokens given, a chat template's):
        gpt2    byte-level BPE with GPT-2's split;
        llama3  byte-level BPE after Llama 3's split regex (ignore_merges),
                a begin-of-text template;
        prefix  byte-level BPE with add_prefix_space, a digits split, and
                added tokens that strip spaces and match single words;
        llama2  SentencePiece-style BPE (Llama 2's, Mistral's): a normalizer
                that prepends ▁ and replaces spaces, no pre-tokenizer, byte
                fallback, fused unknowns;
        bert    BERT's normalizer (lowercase, accents, CJK, control
                characters) and pre-tokenizer, WordPiece, [CLS] $A [SEP];
        wordpiece  NFD, StripAccents, Lowercase; WhitespaceSplit then
                Punctuation; WordPiece;
        t5      NFKC and a regex Replace, Metaspace, Unigram, $A </s>;
        unigram  Metaspace with prepend_scheme first and no split, Unigram.
  tokenizers_oracle.py encode TOKENIZER CORPUS [--no-special]
      prints each text's ids as tokenizers' Tokenizer.encode_batch gives
      them, a JSON list a line.
"""

import argparse
import json
import random

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

PIECES = [
    "The quick brown fox jumps over the lazy dog.", "I'm sure they'll've done it; we'd   go.", "DON'T Shout, it's 'quoted'",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.", "😀 👩‍👩‍👧‍👦 🇯🇵 emoji!! 🏳️‍🌈", "e\u0301 a\u0308 combining: café naïve Å",
    "مرحبا بالعالم ١٢٣", "שלום עולם", "tabs\tand\nnew\nlines\r\n\r\n", "   leading and trailing   ", "numbers 1234567 3.14159 -42 ½ ²",
    "control\x01\x02chars\x7f\x1b[0m", "ünïcödé ÀÉÎÕÜ straße İstanbul ΣΊΣΥΦΟΣ", "code: def f(x):\n    return x**2  # comment",
    "URL https://example.com/a?b=c&d=e", "MIXED case WORDS and CamelCase", "      \n\n   \t ", "a" * 60, "Ⅻ ① ﬁ ㎏ full-width ＡＢＣ１２３",
    "zero\u200bwidth\u200djoin\ufeffbom", "<|endoftext|> inside <|endoftext|>text", "[MASK] and <special> tokens",
    "\u00a0non-breaking\u2003em\u3000ideographic", "long " + "x" * 300,
]


def corpus(path: str, rows: int, ids: bool = False, seed: int = 7) -> None:
    rng = random.Random(seed)
    bad = [b"caf\xe9 latin-1", b"\xff\xfe bytes", b"cut \xe6\x97", b"\xed\xa0\x80 surrogate"]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            parts = [rng.choice(PIECES) for _ in range(rng.randint(1, 4))]
            if i % 17 == 0:
                parts.append(rng.choice(bad).decode("utf-8", errors="replace"))
            row = {"id": i} if ids else {}
            row["text"] = rng.choice(["", " ", "\n"]).join(parts)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def texts(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def train(kind: str, corpus_path: str, out: str, vocab_size: int = 0, special: list[str] | None = None) -> None:
    """Trains a tokenizer of kind on the texts of corpus_path into out;
    vocab_size, if given, instead of the kind's small one; special, added
    special tokens (a chat template's)."""
    data = texts(corpus_path)

    def size(n: int) -> int:
        return vocab_size or n

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if kind == "gpt2":
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        t.post_processor = processors.ByteLevel(trim_offsets=False)
        t.train_from_iterator(data, trainers.BpeTrainer(vocab_size=size(2000), special_tokens=["<|endoftext|>"], initial_alphabet=alphabet))
    elif kind == "llama3":
        t = Tokenizer(models.BPE(ignore_merges=True))
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
                                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        t.decoder = decoders.ByteLevel()
        t.train_from_iterator(data, trainers.BpeTrainer(vocab_size=size(2500), special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                                        initial_alphabet=alphabet))
        bos = t.token_to_id("<|begin_of_text|>")
        t.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                                         special_tokens=[("<|begin_of_text|>", bos)])
    elif kind == "prefix":
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=True)])
        t.decoder = decoders.ByteLevel()
        t.train_from_iterator(data, trainers.BpeTrainer(vocab_size=size(1500), special_tokens=["<s>", "</s>"], initial_alphabet=alphabet))
        t.add_special_tokens([AddedToken("[MASK]", lstrip=True, rstrip=True)])
        t.add_tokens([AddedToken("tokens", single_word=True), AddedToken("<special>", normalized=False)])
        t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", t.token_to_id("<s>")),
                                                                                               ("</s>", t.token_to_id("</s>"))])
    elif kind == "llama2":
        t = Tokenizer(models.BPE(byte_fallback=True, fuse_unk=True, unk_token="<unk>"))
        t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
        bytes_ = [f"<0x{b:02X}>" for b in range(256)]
        t.train_from_iterator(data, trainers.BpeTrainer(vocab_size=size(1200), special_tokens=["<unk>", "<s>", "</s>"] + bytes_,
                                                        limit_alphabet=60))
        t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", t.token_to_id("<s>"))])
    elif kind == "bert":
        t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        t.normalizer = normalizers.BertNormalizer(lowercase=True)
        t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        t.train_from_iterator(data, trainers.WordPieceTrainer(vocab_size=size(2000), special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]))
        t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
    elif kind == "wordpiece":
        t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
        t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
        t.train_from_iterator(data, trainers.WordPieceTrainer(vocab_size=size(1500), special_tokens=["[UNK]"]))
    elif kind == "t5":
        t = Tokenizer(models.Unigram())
        t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
        t.pre_tokenizer = pre_tokenizers.Metaspace()
        t.train_from_iterator(data, trainers.UnigramTrainer(vocab_size=size(1500), special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>"))
        t.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", t.token_to_id("</s>"))])
    elif kind == "unigram":
        t = Tokenizer(models.Unigram())
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
        t.train_from_iterator(data, trainers.UnigramTrainer(vocab_size=size(1200), special_tokens=["<unk>"], unk_token="<unk>", max_piece_length=8))
    else:
        raise SystemExit(f"unknown kind {kind}")
    if special:
        t.add_special_tokens(special)
    t.save(out)


def encode(tokenizer: str, corpus_path: str, special: bool) -> None:
    t = Tokenizer.from_file(tokenizer)
    for enc in t.encode_batch(texts(corpus_path), add_special_tokens=special):
        print(json.dumps(enc.ids))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("file")
    c.add_argument("--rows", type=int, default=2000)
    c.add_argument("--ids", action="store_true")
    c.add_argument("--seed", type=int, default=7)
    t = sub.add_parser("train")
    t.add_argument("kind")
    t.add_argument("corpus")
    t.add_argument("out")
    t.add_argument("--special", default="", help="comma-separated special tokens to add")
    e = sub.add_parser("encode")
    e.add_argument("tokenizer")
    e.add_argument("corpus")
    e.add_argument("--no-special", action="store_true")
    a = ap.parse_args()
    if a.cmd == "corpus":
        corpus(a.file, a.rows, a.ids, a.seed)
    elif a.cmd == "train":
        train(a.kind, a.corpus, a.out, special=[x for x in a.special.split(",") if x])
    else:
        encode(a.tokenizer, a.corpus, not a.no_special)


if __name__ == "__main__":
    main()
