"""The tokenizer conformance matrix: tokenizer.json files of every family
users train with, texts of every kind, and the ids Hugging Face
tokenizers (bin/venv-tok, pinned in hack/requirements-tokenizers.txt)
gives each text, recorded for the Go tokenizer's unit tests
(sidecar/tokenizer/conformance_test.go), which read them without Python.

  tokenizer_matrix.py record DIR   trains the files and writes DIR
                                   (sidecar/tokenizer/testdata/conformance)
  tokenizer_matrix.py check DIR    encodes DIR's texts with DIR's files
                                   again and fails on any difference from
                                   its recorded ids (the oracle drifted)

The files are made two ways, as real models' files are:
  - transformers' conversions (every family's tokenizer class that can be
    fed a locally trained sentencepiece model or vocabulary, and the
    converter classes themselves for ALBERT and Pegasus, whose
    from_pretrained fails in transformers 5.22) run on models
    sentencepiece and tokenizers train here on a multilingual corpus;
  - tokenizers pipelines mirroring named model families' tokenizer.json.
Each gets added tokens with every flag. DIR holds, gzipped:
  texts.jsonl.gz               {"class": ..., "text": ...} a line
  charsmaps/SHA.b64.gz         each Precompiled charsmap once (a file's
                               precompiled_charsmap names it "sha256:SHA")
  NAME.json.gz                 the tokenizer.json
  NAME.ids.gz                  a line a text: the first 8 hex digits of
                               sha256 over its ids with and without the
                               special tokens; every 97th text also its
                               ids in full
"""

import base64
import gzip
import hashlib
import importlib
import json
import os
import random
import sys
import tempfile
import unicodedata
from typing import Any, Callable

import sentencepiece
import shutil
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SAMPLE_EVERY = 97

# --- texts -------------------------------------------------------------

WORDS = ["The quick brown fox jumps over the lazy dog.", "I'm sure they'll've done it; we'd   go.", "DON'T Shout, it's 'quoted'",
         "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.", "नमस्ते दुनिया, हिन्दी भाषा", "สวัสดีชาวโลก ภาษาไทย",
         "مرحبا بالعالم ١٢٣", "שלום עולם", "Привет, мир! Ёжик", "Γειά σου Κόσμε ΣΊΣΥΦΟΣ", "ünïcödé ÀÉÎÕÜ straße İstanbul",
         "code: def f(x):\n    return x**2  # comment", "URL https://example.com/a?b=c&d=e", "numbers 1234567 3.14159 -42 ½ ²",
         "Ⅻ ① ﬁ ㎏ full-width ＡＢＣ１２３", "e\u0301 a\u0308 combining: café naïve Å", "😀 👩‍👩‍👧‍👦 🇯🇵 🏳️‍🌈 🫩", "tabs\tand\nnew\nlines\r\n\r\n"]


def blocks() -> list[str]:
    """A text from every 128 code points: each assigned block, and the
    ones Python's Unicode does not know yet."""
    out = []
    for base in range(0, 0x110000, 128):
        if 0xD800 <= base < 0xE000:
            continue
        cats = {unicodedata.category(chr(c)) for c in range(base, base + 128)}
        if cats <= {"Cn", "Co"} and base % (64 * 128) != 0:
            continue  # of unassigned or private planes, one in 64
        chars = [chr(c) for c in range(base, base + 128) if unicodedata.category(chr(c)) != "Cn" or c % 7 == 0]
        rng = random.Random(base)
        picked = rng.sample(chars, min(12, len(chars)))
        out.append("".join(picked[:6]) + " " + "".join(picked[6:]) + " x" + picked[0])
    return out


def texts() -> list[tuple[str, str]]:
    rng = random.Random(87)
    out: list[tuple[str, str]] = []

    def add(cls: str, t: str) -> None:
        out.append((cls, t))

    for t in blocks():
        add("block", t)
    marks = ["\u0301", "\u0316", "\u0334", "\u0345", "\u05b0", "\u093c", "\u0327", "\u031b", "\u302a", "\u0f71"]
    for n in [1, 2, 29, 30, 31, 32, 45, 61, 100]:
        add("marks", "a" + "".join(rng.choice(marks) for _ in range(n)) + " e" + "\u0301" * n + "x")
        add("marks", "\u1100\u1161" + "\u0301" * n + "\u11a8 Å" + "\u0316\u0301" * (n // 2))
    for t in ["", " ", "  ", "\n", "\t", "   \n\n  ", "\u3000", "\u00a0", "\u2028", "\x00", "\ufeff", "\u200b", "\u034f"]:
        add("empty", t)
    for t in ["  hello", "   two  spaces  ", " hello", "hello ", "\thello", "\u3000hello", "\ufeffhello", "\x01hello", "\u0301hello"]:
        add("leading", t)
    ws = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u200b", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\u180e", "\u200d"]
    ctl = ["\x00", "\x01", "\x07", "\x1b", "\x7f", "\x80", "\x9f", "\u00ad", "\u200e", "\u202e", "\u2066", "\ufff9", "\U000e0001", "\ufffd"]
    for _ in range(60):
        add("space", "".join(rng.choice(ws + ["a", "b", "x1"]) for _ in range(rng.randint(1, 12))))
        add("control", "".join(rng.choice(ctl + ws + ["w", "é"]) for _ in range(rng.randint(1, 12))))
    emoji = ["👩‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "🇯🇵🇫🇷", "❤️", "🫩", "🫆", "🪾", "©\u200d©", "👨🏿‍🚀", "#️⃣", "🧑‍🤝‍🧑"]
    for _ in range(40):
        add("emoji", " ".join(rng.choice(emoji) for _ in range(rng.randint(1, 5))) + rng.choice(["", "!", " ok", "a"]))
    bidi = ["\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u2066", "\u2067", "\u2069", "\u061c"]
    for _ in range(30):
        add("bidi", rng.choice(bidi) + "שלום " + rng.choice(bidi) + "abc" + rng.choice(bidi) + " مرحبا" + rng.choice(bidi))
    for _ in range(40):
        add("digits", "".join(rng.choice(["1", "23", "456", "7890", "١٢", "٣", "½", "²", "Ⅻ", "①", "𝟗", " ", ".", ",", "-"]) for _ in range(rng.randint(1, 20))))
    for n in [50, 100, 101, 200, 257, 600, 2000]:
        add("long", "x" * n)
        add("long", "antidisestablishment" * (n // 20) + " " + "語" * (n // 10))
        add("long", "a" * n + "\u0301")
    specials = ["<|endoftext|>", "<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "<mask>", "<pad>", "<|im_start|>", "<|im_end|>",
                "<|begin_of_text|>", "tokens", "<special>", "▁", "<0x41>", "[UNK]", "en_XX", "<extra_id_0>", "ÅBC"]
    for _ in range(80):
        parts = [rng.choice(specials + WORDS) for _ in range(rng.randint(1, 5))]
        add("special", rng.choice(["", " ", "  ", "\n"]).join(parts))
    for t in ["tokens tokens", "xtokens", "tokensx", "token s", "tokens\u0301", "tokens\u200d", "é tokens", "_tokens", "1tokens",
              "[MASK]", " [MASK] ", "a  [MASK]  b", "<special>  x", "x  <special>"]:
        add("special", t)
    for _ in range(400):
        parts = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
        add("mixed", rng.choice(["", " ", "\n", "  "]).join(parts))
    for _ in range(200):
        add("random", "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff), rng.randint(0x3000, 0xd7ff),
                                             rng.randint(0xe000, 0xffff), rng.randint(0x10000, 0x10ffff)])) for _ in range(rng.randint(1, 40))))
    return out


# --- training ------------------------------------------------------------


def corpus() -> list[str]:
    rng = random.Random(5)
    lines = []
    for _ in range(3000):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))))
    for t in blocks()[:60]:
        lines.append(t)
    return lines


def spm_model(d: str, kind: str, rule: str = "nmt_nfkc", byte_fallback: bool = False, extra: dict[str, Any] | None = None) -> str:
    prefix = os.path.join(d, f"{kind}-{rule}-{int(byte_fallback)}")
    path = prefix + ".txt"
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(line.replace("\n", " ") for line in corpus()))
    args = dict(input=path, model_prefix=prefix, vocab_size=1600, model_type=kind, normalization_rule_name=rule, byte_fallback=byte_fallback,
                character_coverage=0.9995, minloglevel=2, num_threads=1, hard_vocab_limit=False, user_defined_symbols=["<special>"])
    args.update(extra or {})
    sentencepiece.SentencePieceTrainer.train(**args)
    return prefix + ".model"


class Slow:
    """What transformers' converter classes read of a slow tokenizer, for a
    sentencepiece model (for the families whose from_pretrained fails in
    transformers 5.22: ALBERT, Pegasus)."""

    def __init__(self, model: str, **options: Any) -> None:
        self.vocab_file = model
        self.sp = sentencepiece.SentencePieceProcessor(model_file=model)
        self.keep_accents, self.do_lower_case, self.offset = False, False, 103
        self.mask_token_sent, self.mask_token = "<mask_1>", "<mask_2>"
        self.unk_token, self.pad_token, self.eos_token = "<unk>", "<pad>", "</s>"
        for k, v in options.items():
            setattr(self, k, v)

    def convert_tokens_to_ids(self, token: str) -> int:
        return int(self.sp.piece_to_id(token))

    def convert_ids_to_tokens(self, i: int) -> str:
        return str(self.sp.id_to_piece(i))

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_token_id"):
            return self.convert_tokens_to_ids(getattr(self, name[: -len("_id")]))
        raise AttributeError(name)


def trained(model: Any, pre: Any, trainer: Any, norm: Any = None, specials: list[str] | None = None) -> Tokenizer:
    t = Tokenizer(model)
    if norm is not None:
        t.normalizer = norm
    if pre is not None:
        t.pre_tokenizer = pre
    t.train_from_iterator(corpus(), trainer)
    return t


BYTES = pre_tokenizers.ByteLevel.alphabet()
SPECIAL = ["<s>", "</s>", "<unk>", "<pad>", "<mask>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "<|endoftext|>"]


def bpe(pre: Any, norm: Any = None, **model: Any) -> Tokenizer:
    return trained(models.BPE(**model), pre, trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL, initial_alphabet=BYTES, show_progress=False), norm)


def wordpiece(norm: Any, pre: Any) -> Tokenizer:
    return trained(models.WordPiece(unk_token="[UNK]"), pre, trainers.WordPieceTrainer(vocab_size=1500, special_tokens=SPECIAL, show_progress=False), norm)


def template(t: Tokenizer, single: str, tokens: list[str]) -> None:
    t.post_processor = processors.TemplateProcessing(single=single, special_tokens=[(x, t.token_to_id(x)) for x in tokens])


def added(t: Tokenizer) -> Tokenizer:
    """Added tokens of every flag."""
    t.add_special_tokens([AddedToken("<|im_start|>", normalized=False), AddedToken("[MASK]", lstrip=True, rstrip=False),
                          AddedToken("<|im_end|>", rstrip=True, normalized=False)])
    t.add_tokens([AddedToken("tokens", single_word=True, normalized=True), AddedToken("<special>", lstrip=True, rstrip=True, normalized=False),
                  AddedToken("ÅBC", normalized=True), AddedToken("  x", normalized=False)])
    return t


LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BLOOM = r" ?[^(\s|[.,!?…。，、।۔،])]+"
CLIP = r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"


def bytelevel(prefix: bool = False, regex: bool = False) -> Any:
    return pre_tokenizers.ByteLevel(add_prefix_space=prefix, use_regex=regex)


def split(pattern: str, behavior: str = "isolated", invert: bool = False) -> Any:
    return pre_tokenizers.Split(Regex(pattern), behavior=behavior, invert=invert)


def pipelines() -> dict[str, Callable[[], Tokenizer]]:
    def bert(lower: bool, strip: bool | None = None, chinese: bool = True) -> Tokenizer:
        t = wordpiece(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=chinese, strip_accents=strip, lowercase=lower),
                      pre_tokenizers.BertPreTokenizer())
        t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
        return added(t)

    def gpt2() -> Tokenizer:
        t = bpe(bytelevel(regex=True))
        t.post_processor = processors.ByteLevel(trim_offsets=False)
        return added(t)

    def roberta() -> Tokenizer:
        t = bpe(bytelevel(regex=True))
        t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>")))
        return added(t)

    def neox() -> Tokenizer:
        return added(bpe(bytelevel(regex=True), normalizers.NFC()))

    def regex_bpe(pattern: str, norm: Any = None, bos: bool = True, **model: Any) -> Tokenizer:
        t = bpe(pre_tokenizers.Sequence([split(pattern), bytelevel()]), norm, **model)
        if bos:
            template(t, "<s> $A", ["<s>"])
        return added(t)

    def deepseek() -> Tokenizer:
        t = bpe(pre_tokenizers.Sequence([split(r"\p{N}{1,3}"), split("[一-龥\u3040-ゟ゠-ヿ]+"), split(DEEPSEEK), bytelevel()]))
        template(t, "<s> $A", ["<s>"])
        return added(t)

    def bloom() -> Tokenizer:
        t = bpe(pre_tokenizers.Sequence([split(BLOOM), bytelevel()]))
        return added(t)

    def falcon() -> Tokenizer:
        return added(bpe(pre_tokenizers.Sequence([pre_tokenizers.Punctuation("contiguous"), bytelevel(regex=True),
                                                  pre_tokenizers.Digits(individual_digits=False), split("[0-9][0-9][0-9]")])))

    def starcoder() -> Tokenizer:
        return added(bpe(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bytelevel(regex=True)])))

    def clip() -> Tokenizer:
        norm = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()])
        t = bpe(pre_tokenizers.Sequence([split(CLIP, "removed", invert=True), bytelevel()]), norm, end_of_word_suffix="</w>", continuing_subword_prefix="")
        template(t, "<s> $A </s>", ["<s>", "</s>"])
        return added(t)

    def whisper() -> Tokenizer:
        t = bpe(bytelevel(regex=True))
        template(t, "<|endoftext|> <s> $A </s>", ["<|endoftext|>", "<s>", "</s>"])
        return added(t)

    def mixed() -> Tokenizer:
        # Every other component once: Whitespace, WhitespaceSplit,
        # Punctuation behaviors, Strip, Nmt, NFKD, StripAccents, Replace of
        # anchors, Split on empty matches.
        norm = normalizers.Sequence([normalizers.Nmt(), normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase(),
                                     normalizers.Strip(left=True, right=False), normalizers.Replace(Regex(r"^\s+"), "^"),
                                     normalizers.Replace(Regex(r"x+"), "-")])
        pre = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation("merged_with_previous"),
                                       split(r"\d", "merged_with_next"), split(r"$|^a", "contiguous")])
        return added(wordpiece(norm, pre))

    def metaspace(scheme: str, split_: bool) -> Tokenizer:
        norm = normalizers.Sequence([normalizers.Strip(left=True, right=True), normalizers.Replace(Regex(r"\A▁"), "▁▁"), normalizers.NFKC()])
        t = trained(models.Unigram(), pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split_),
                    trainers.UnigramTrainer(vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False, max_piece_length=8), norm)
        return added(t)

    return {
        "bert-uncased": lambda: bert(True), "bert-cased": lambda: bert(False), "bert-multilingual-cased": lambda: bert(False, chinese=True),
        "bert-uncased-keep-accents": lambda: bert(True, strip=False), "bert-cased-strip-accents": lambda: bert(False, strip=True),
        "gpt2": gpt2, "roberta": roberta, "gpt-neox": neox,
        "llama3": lambda: regex_bpe(LLAMA3, ignore_merges=True), "qwen2": lambda: regex_bpe(QWEN2, normalizers.NFC(), bos=False),
        "o200k": lambda: regex_bpe(O200K, bos=False), "deepseek-v3": deepseek, "bloom": bloom, "falcon": falcon, "starcoder": starcoder,
        "clip": clip, "whisper": whisper, "components": mixed,
        "metaspace-first": lambda: metaspace("first", False), "metaspace-always-split": lambda: metaspace("always", True),
    }


SPM_NAMES = ["tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "spm.model", "sentencepiece.model", "sentencepiece.bpe.model"]


def converted() -> dict[str, Callable[[str], Tokenizer]]:
    """transformers' conversions to fast tokenizers, as a user gets them:
    each family's tokenizer class loading a folder with a locally trained
    sentencepiece model, or a vocabulary, under its file names."""

    import transformers  # only to record: its import is slow and noisy

    def spm(cls: str, kind: str = "unigram", rule: str = "nmt_nfkc", byte_fallback: bool = False, **opts: Any) -> Callable[[str], Tokenizer]:
        def make(d: str) -> Tokenizer:
            model = spm_model(d, kind, rule, byte_fallback)
            folder = tempfile.mkdtemp(dir=d)
            for name in SPM_NAMES:
                shutil.copy(model, os.path.join(folder, name))
            return getattr(transformers, cls).from_pretrained(folder, **opts).backend_tokenizer
        return make

    def vocab(cls: str, train: Callable[[], Tokenizer], **opts: Any) -> Callable[[str], Tokenizer]:
        def make(d: str) -> Tokenizer:
            folder = tempfile.mkdtemp(dir=d)
            model = json.loads(train().to_str())["model"]
            voc = model["vocab"]
            with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
                f.write("".join(tok + "\n" for tok, _ in sorted(voc.items(), key=lambda kv: kv[1])))
            with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
                json.dump(voc, f, ensure_ascii=False)
            with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
                f.write("#version: 0.2\n" + "".join((m if isinstance(m, str) else " ".join(m)) + "\n" for m in model.get("merges") or []))
            return getattr(transformers, cls).from_pretrained(folder, **opts).backend_tokenizer
        return make

    def bytelevel_bpe() -> Tokenizer:
        return bpe(bytelevel(regex=True))

    def wp() -> Tokenizer:
        return wordpiece(normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer())

    def converter(name: str, **opts: Any) -> Callable[[str], Tokenizer]:
        cls = getattr(importlib.import_module("transformers.convert_slow_tokenizer"), name)
        return lambda d: cls(Slow(spm_model(d, "unigram"), **opts)).converted()

    return {
        "conv-albert": converter("AlbertConverter", do_lower_case=True), "conv-albert-keep-accents": converter("AlbertConverter", keep_accents=True),
        "conv-pegasus": converter("PegasusConverter"),
        "conv-t5": spm("T5Tokenizer"), "conv-mt5-identity": spm("T5Tokenizer", rule="identity"),
        "conv-xlm-roberta": spm("XLMRobertaTokenizer"), "conv-xlnet": spm("XLNetTokenizer"),
        "conv-camembert": spm("CamembertTokenizer"), "conv-barthez": spm("BarthezTokenizer"),
        "conv-mbart": spm("MBartTokenizer"), "conv-mbart50": spm("MBart50Tokenizer"), "conv-nllb": spm("NllbTokenizer"),
        "conv-seamless-m4t": spm("SeamlessM4TTokenizer"),
        "conv-bigbird": spm("BigBirdTokenizer"), "conv-rembert": spm("RemBertTokenizer"), "conv-fnet": spm("FNetTokenizer"),
        "conv-reformer": spm("ReformerTokenizer"), "conv-xglm": spm("XGLMTokenizer"),
        "conv-deberta-v2": spm("DebertaV2Tokenizer", split_by_punct=True), "conv-deberta-v3-lower": spm("DebertaV2Tokenizer", do_lower_case=True),
        "conv-udop": spm("UdopTokenizer"), "conv-layoutxlm": spm("LayoutXLMTokenizer"), "conv-nmt-nfkc-cf": spm("T5Tokenizer", rule="nmt_nfkc_cf"),
        "conv-llama-legacy": spm("LlamaTokenizer", kind="bpe", rule="identity", byte_fallback=True, legacy=True),
        "conv-llama": spm("LlamaTokenizer", kind="bpe", rule="identity", byte_fallback=True, legacy=False),
        "conv-mistral": spm("LlamaTokenizer", kind="bpe", rule="identity", byte_fallback=True, legacy=False, add_prefix_space=False),
        "conv-code-llama": spm("CodeLlamaTokenizer", kind="bpe", rule="identity", byte_fallback=True),
        "conv-gemma": spm("GemmaTokenizer", kind="bpe", rule="identity", byte_fallback=True),
        "conv-bert": vocab("BertTokenizer", wp), "conv-bert-cased": vocab("BertTokenizer", wp, do_lower_case=False),
        "conv-funnel": vocab("FunnelTokenizer", wp), "conv-mpnet": vocab("MPNetTokenizer", wp), "conv-electra": vocab("ElectraTokenizer", wp),
        "conv-gpt2": vocab("GPT2Tokenizer", bytelevel_bpe), "conv-roberta": vocab("RobertaTokenizer", bytelevel_bpe),
        "conv-deberta": vocab("DebertaTokenizer", bytelevel_bpe), "conv-qwen2": vocab("Qwen2Tokenizer", bytelevel_bpe),
        "conv-clip": vocab("CLIPTokenizer", lambda: bpe(bytelevel(regex=True), end_of_word_suffix="</w>")),
        "conv-whisper": vocab("WhisperTokenizer", bytelevel_bpe), "conv-bart": vocab("BartTokenizer", bytelevel_bpe),
        "conv-codegen": vocab("CodeGenTokenizer", bytelevel_bpe), "conv-blenderbot": vocab("BlenderbotTokenizer", bytelevel_bpe),
        "conv-markuplm": vocab("MarkupLMTokenizer", bytelevel_bpe, tags_dict={"html": 0, "body": 1}), "conv-longformer": vocab("LongformerTokenizer", bytelevel_bpe),
        "conv-layoutlmv3": vocab("LayoutLMv3Tokenizer", bytelevel_bpe), "conv-splinter": vocab("SplinterTokenizer", wp),
        "conv-herbert": vocab("HerbertTokenizer", lambda: bpe(pre_tokenizers.BertPreTokenizer(), end_of_word_suffix="</w>")),
        "conv-videoprism": spm("VideoPrismTokenizer"),
        "conv-phi3": spm("Phi3Tokenizer", kind="bpe", rule="identity", byte_fallback=True),
        "conv-openai-gpt": vocab("OpenAIGPTTokenizer", lambda: bpe(pre_tokenizers.BertPreTokenizer(), end_of_word_suffix="</w>")),
    }


def t5_from(lines: list[str], d: str, vocab_size: int = 8000) -> Tokenizer:
    """T5's tokenizer as transformers converts a sentencepiece model
    trained on lines (the tokenizer benchmark's Precompiled pipeline)."""
    path = os.path.join(d, "t5-corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(line.replace("\n", " ") for line in lines))
    prefix = os.path.join(d, "t5-bench")
    sentencepiece.SentencePieceTrainer.train(input=path, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram", minloglevel=2,
                                             hard_vocab_limit=False, input_sentence_size=200_000, shuffle_input_sentence=True)
    import transformers

    folder = tempfile.mkdtemp(dir=d)
    for name in SPM_NAMES:
        shutil.copy(prefix + ".model", os.path.join(folder, name))
    t: Tokenizer = transformers.T5Tokenizer.from_pretrained(folder).backend_tokenizer
    t.no_truncation()
    t.no_padding()
    return t


# --- recording -----------------------------------------------------------


def ids_hash(a: list[int], b: list[int]) -> str:
    return hashlib.sha256(json.dumps([a, b]).encode()).hexdigest()[:8]


def strip_charsmaps(doc: Any, store: dict[str, str]) -> Any:
    if isinstance(doc, dict):
        if doc.get("type") == "Precompiled" and isinstance(doc.get("precompiled_charsmap"), str):
            raw = doc["precompiled_charsmap"]
            sha = hashlib.sha256(raw.encode()).hexdigest()[:16]
            store[sha] = raw
            return {**doc, "precompiled_charsmap": "sha256:" + sha}
        return {k: strip_charsmaps(v, store) for k, v in doc.items()}
    if isinstance(doc, list):
        return [strip_charsmaps(v, store) for v in doc]
    return doc


def write_gz(path: str, data: str) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(data.encode())


def read_gz(path: str) -> str:
    with gzip.open(path, "rb") as f:
        return f.read().decode()


def encoded(t: Tokenizer, ts: list[str]) -> str:
    with_special = t.encode_batch(ts, add_special_tokens=True)
    without = t.encode_batch(ts, add_special_tokens=False)
    lines = []
    for i, (a, b) in enumerate(zip(with_special, without)):
        line = ids_hash(a.ids, b.ids)
        if i % SAMPLE_EVERY == 0:
            line += " " + json.dumps([a.ids, b.ids], separators=(",", ":"))
        lines.append(line)
    return "\n".join(lines) + "\n"


def record(out: str) -> None:
    os.makedirs(os.path.join(out, "charsmaps"), exist_ok=True)
    ts = texts()
    write_gz(os.path.join(out, "texts.jsonl.gz"), "".join(json.dumps({"class": c, "text": t}, ensure_ascii=False) + "\n" for c, t in ts))
    plain = [t for _, t in ts]
    store: dict[str, str] = {}
    made = {}
    with tempfile.TemporaryDirectory() as d:
        for name, make in pipelines().items():
            made[name] = make()
        for name, make in converted().items():
            try:
                made[name] = added(make(d))
            except Exception as e:  # noqa: BLE001 - a family this transformers cannot convert is said, not fatal
                print(f"{name}: transformers could not make it: {e!r}"[:300], file=sys.stderr)
    for name, t in sorted(made.items()):
        t.no_truncation()
        t.no_padding()
        doc = json.loads(t.to_str())
        write_gz(os.path.join(out, name + ".json.gz"), json.dumps(strip_charsmaps(doc, store), ensure_ascii=False, sort_keys=True))
        # The ids of the file as saved and loaded, which is what users
        # run (an in-memory tokenizer can differ from its own file).
        write_gz(os.path.join(out, name + ".ids.gz"), encoded(Tokenizer.from_str(t.to_str()), plain))
        print(f"{name}: recorded", file=sys.stderr)
    for sha, raw in store.items():
        write_gz(os.path.join(out, "charsmaps", sha + ".b64.gz"), raw)


def load(dir_: str, name: str) -> Tokenizer:
    doc = json.loads(read_gz(os.path.join(dir_, name + ".json.gz")))

    def restore(x: Any) -> Any:
        if isinstance(x, dict):
            cm = x.get("precompiled_charsmap")
            if isinstance(cm, str) and cm.startswith("sha256:"):
                return {**x, "precompiled_charsmap": read_gz(os.path.join(dir_, "charsmaps", cm[7:] + ".b64.gz"))}
            return {k: restore(v) for k, v in x.items()}
        if isinstance(x, list):
            return [restore(v) for v in x]
        return x

    return Tokenizer.from_str(json.dumps(restore(doc)))


def check(dir_: str) -> None:
    # Lines end in \n alone: a text may hold U+2028 and its kin.
    ts = [json.loads(line)["text"] for line in read_gz(os.path.join(dir_, "texts.jsonl.gz")).split("\n") if line]
    bad = 0
    for f in sorted(os.listdir(dir_)):
        if not f.endswith(".ids.gz"):
            continue
        name = f[: -len(".ids.gz")]
        want = [line.split(" ")[0] for line in read_gz(os.path.join(dir_, f)).split("\n") if line]
        got = [line.split(" ")[0] for line in encoded(load(dir_, name), ts).split("\n") if line]
        diff = sum(1 for a, b in zip(want, got) if a != b) + abs(len(want) - len(got))
        if diff:
            print(f"{name}: tokenizers gives other ids for {diff} of {len(ts)} texts than recorded (run make golden)", file=sys.stderr)
            bad += 1
    if bad:
        raise SystemExit(1)
    print(f"the recorded ids are tokenizers' own ({len(ts)} texts)", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("record", "check"):
        raise SystemExit(__doc__)
    {"record": record, "check": check}[sys.argv[1]](sys.argv[2])
