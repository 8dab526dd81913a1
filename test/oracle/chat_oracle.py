"""Chat templates rendered and tokenized by transformers itself
(bin/venv-tok), for the tests of shardfeed's chat templates
(sidecar/chat): apply_chat_template with the template given, and the
assistant tokens' mask of return_assistant_tokens_mask.

  chat_oracle.py conversations FILE [--rows N] [--seed S]
      writes FILE: N conversations as JSON lines, {"id": row, "messages":
      [{"role", "content"}, ...]}: an optional system message, then one to
      four user and assistant turns whose contents are the tokenizer
      tests' Unicode texts; every 23rd has two user turns in a row (a
      template may refuse it); every 5th has assistant turns with
      tool_calls and the tool turns of their results.
  chat_oracle.py render TOKENIZER TEMPLATE CONVERSATIONS [--bos B] [--eos E]
      prints, for each conversation, a JSON line {"text", "ids", "mask"}
      as apply_chat_template gives them (rendered, then tokenized with
      return_assistant_tokens_mask), or {"error": message} when the
      template raises.
  chat_oracle.py record DIR
      records the chat conformance cases (CASES below) under DIR
      (sidecar/chat/testdata/conformance) for sidecar/chat's unit tests:
      conversations.jsonl.gz, and per case its tokenizer.json
      (NAME.tokenizer.json.gz, trained by tokenizers) and what
      apply_chat_template gives each conversation (NAME.out.gz, a JSON line
      each: {"hash": first 16 hex digits of sha256 over [text, ids],
      "mask": the assistant mask as runs "0x12 1x5 …"} or {"error": msg});
      cases.json names each case's template and options, and templates/
      holds a copy of each template (test/oracle/chat_templates).
  chat_oracle.py check DIR
      renders DIR's conversations again with DIR's tokenizers and fails on
      any difference from the record (the oracle drifted).
  chat_oracle.py jinja CASES
      reads JSON lines {"template", "messages", "vars"} and prints for each
      {"text", "spans"} as transformers renders it (its Jinja environment:
      trim_blocks, lstrip_blocks, loop controls, {% generation %} with the
      spans it marks, in bytes of the UTF-8 text), or {"error": message}.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile

from tokenizers_oracle import PIECES  # type: ignore[import-not-found]


def conversations(path: str, rows: int, seed: int) -> None:
    rng = random.Random(seed)

    def text() -> str:
        return rng.choice(["", " ", "\n"]).join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))

    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            msgs = []
            if rng.random() < 0.4:
                msgs.append({"role": "system", "content": text()})
            for _ in range(rng.randint(1, 4)):
                msgs.append({"role": "user", "content": text()})
                if i % 5 == 2:
                    # A tool call or two, their results, then the answer.
                    calls = [{"type": "function", "function": {"name": rng.choice(["get_weather", "search", "wörterbuch"]),
                                                               "arguments": {"query": text(), "days": rng.randint(0, 9), "units": ["c", "f"],
                                                                             "strict": rng.random() < 0.5}}}
                             for _ in range(rng.randint(1, 2))]
                    msgs.append({"role": "assistant", "content": rng.choice(["", text()]), "tool_calls": calls})
                    for _ in calls:
                        msgs.append({"role": "tool", "content": text()})
                if i % 23 != 5:
                    msgs.append({"role": "assistant", "content": text()})
            f.write(json.dumps({"id": i, "messages": msgs}, ensure_ascii=False) + "\n")


def render(tokenizer: str, template: str, path: str, bos: str, eos: str) -> None:
    from transformers import PreTrainedTokenizerFast  # type: ignore[import-untyped]

    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer, bos_token=bos, eos_token=eos)
    with open(template, encoding="utf-8") as f:
        tpl = f.read()
    with open(path, encoding="utf-8") as f:
        for line in f:
            msgs = json.loads(line)["messages"]
            try:
                text = tok.apply_chat_template(msgs, chat_template=tpl, tokenize=False)
                out = tok.apply_chat_template(msgs, chat_template=tpl, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
            except Exception as e:  # the template's raise_exception
                print(json.dumps({"error": str(e)}))
                continue
            print(json.dumps({"text": text, "ids": out["input_ids"], "mask": out["assistant_masks"]}, ensure_ascii=False))
    sys.stdout.flush()


# The recorded cases: a template rendered with a tokenizer of a kind
# tokenizers_oracle trains (with the template's special tokens), its
# bos_token and eos_token; plain, when set, is the template shardfeed
# renders instead (without generation blocks, marked by start and end);
# stops: transformers stops marking where a normalizer dropped a span's
# first character (T5's), and shardfeed marks on.
CASES = [
    {"name": "chatml", "kind": "gpt2", "template": "chatml.jinja", "special": "<|im_start|>,<|im_end|>", "bos": "<s>", "eos": "<|endoftext|>"},
    {"name": "llama3", "kind": "llama3", "template": "llama3.jinja", "special": "<|start_header_id|>,<|end_header_id|>,<|eot_id|>",
     "bos": "<|begin_of_text|>", "eos": "<|end_of_text|>"},
    {"name": "mistral", "kind": "llama2", "template": "mistral.jinja", "special": "", "bos": "<s>", "eos": "</s>"},
    {"name": "tools", "kind": "gpt2", "template": "tools.jinja", "special": "<|system|>,<|user|>,<|assistant|>", "bos": "<s>", "eos": "<|endoftext|>"},
    {"name": "gemma", "kind": "gpt2", "template": "gemma.jinja", "special": "<bos>,<eos>,<start_of_turn>,<end_of_turn>", "bos": "<bos>", "eos": "<eos>"},
    {"name": "qwen2.5-tool-calls", "kind": "gpt2", "template": "qwen-tools.jinja",
     "special": "<|im_start|>,<|im_end|>,<tool_call>,</tool_call>,<tool_response>,</tool_response>", "bos": "<s>", "eos": "<|im_end|>"},
    {"name": "t5-chatml", "kind": "t5", "template": "chatml.jinja", "special": "<|im_start|>,<|im_end|>", "bos": "<s>", "eos": "</s>", "stops": True},
    {"name": "chatml-marked", "kind": "gpt2", "template": "chatml.jinja", "special": "<|im_start|>,<|im_end|>", "bos": "<s>", "eos": "<|endoftext|>",
     "plain": "chatml-plain.jinja", "start": "<|im_start|>assistant\n", "end": "<|im_end|>"},
    {"name": "llama3-marked", "kind": "llama3", "template": "llama3.jinja", "special": "<|start_header_id|>,<|end_header_id|>,<|eot_id|>",
     "bos": "<|begin_of_text|>", "eos": "<|end_of_text|>", "plain": "llama3-plain.jinja",
     "start": "<|start_header_id|>assistant<|end_header_id|>\n\n", "end": "<|eot_id|>"},
]

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_templates")


def runs(mask: list[int]) -> str:
    out: list[str] = []
    for m in mask:
        if out and out[-1].startswith(f"{m}x"):
            out[-1] = f"{m}x{int(out[-1][2:]) + 1}"
        else:
            out.append(f"{m}x1")
    return " ".join(out)


def outcomes(tokenizer: str, template: str, convs: list[list[dict]], bos: str, eos: str) -> list[dict]:
    from transformers import PreTrainedTokenizerFast  # type: ignore[import-untyped]

    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer, bos_token=bos, eos_token=eos)
    with open(template, encoding="utf-8") as f:
        tpl = f.read()
    out = []
    for msgs in convs:
        try:
            text = tok.apply_chat_template(msgs, chat_template=tpl, tokenize=False)
            enc = tok.apply_chat_template(msgs, chat_template=tpl, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        except Exception as e:  # the template's raise_exception
            out.append({"error": str(e)})
            continue
        digest = hashlib.sha256(json.dumps([text, enc["input_ids"]], ensure_ascii=False).encode()).hexdigest()[:16]
        out.append({"hash": digest, "mask": runs(enc["assistant_masks"])})
    return out


def record(out: str) -> None:
    from tokenizer_matrix import write_gz  # type: ignore[import-not-found]
    from tokenizers_oracle import corpus, train  # type: ignore[import-not-found]

    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        convs_path, corpus_path = os.path.join(d, "c.jsonl"), os.path.join(d, "corpus.jsonl")
        conversations(convs_path, 300, 3)
        corpus(corpus_path, 1000)
        with open(convs_path, encoding="utf-8") as f:
            raw = f.read()
        write_gz(os.path.join(out, "conversations.jsonl.gz"), raw)
        convs = [json.loads(line)["messages"] for line in raw.split("\n") if line]
        for case in CASES:
            tok = os.path.join(d, case["name"] + ".json")
            train(case["kind"], corpus_path, tok, special=[x for x in case["special"].split(",") if x])
            with open(tok, encoding="utf-8") as f:
                write_gz(os.path.join(out, case["name"] + ".tokenizer.json.gz"), f.read())
            got = outcomes(tok, os.path.join(TEMPLATES, case["template"]), convs, case["bos"], case["eos"])
            write_gz(os.path.join(out, case["name"] + ".out.gz"), "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in got))
            print(f"{case['name']}: recorded", file=sys.stderr)
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(CASES, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.makedirs(os.path.join(out, "templates"), exist_ok=True)
    for name in sorted({c[k] for c in CASES for k in ("template", "plain") if k in c}):
        shutil.copy(os.path.join(TEMPLATES, name), os.path.join(out, "templates", name))


def check(dir_: str) -> None:
    from tokenizer_matrix import read_gz  # type: ignore[import-not-found]

    convs = [json.loads(line)["messages"] for line in read_gz(os.path.join(dir_, "conversations.jsonl.gz")).split("\n") if line]
    with open(os.path.join(dir_, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for case in cases:
            tok = os.path.join(d, case["name"] + ".json")
            with open(tok, "w", encoding="utf-8") as f:
                f.write(read_gz(os.path.join(dir_, case["name"] + ".tokenizer.json.gz")))
            want = [json.loads(line) for line in read_gz(os.path.join(dir_, case["name"] + ".out.gz")).split("\n") if line]
            got = outcomes(tok, os.path.join(dir_, "templates", case["template"]), convs, case["bos"], case["eos"])
            diff = sum(1 for a, b in zip(want, got) if a != b) + abs(len(want) - len(got))
            if diff:
                print(f"{case['name']}: transformers renders {diff} of {len(convs)} conversations otherwise than recorded (run make golden)",
                      file=sys.stderr)
                bad += 1
    if bad:
        raise SystemExit(1)
    print(f"the recorded chats are transformers' own ({len(cases)} templates, {len(convs)} conversations)", file=sys.stderr)


def jinja(path: str) -> None:
    from transformers.utils.chat_template_utils import _compile_jinja_template, _render_with_assistant_indices  # type: ignore[import-untyped]

    with open(path, encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            try:
                tpl = _compile_jinja_template(case["template"])
                text, spans = _render_with_assistant_indices(tpl, case["messages"], None, None, False, **case["vars"])
            except Exception as e:
                print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
                continue
            byte_spans = [[len(text[:a].encode()), len(text[:b].encode())] for a, b in spans]
            print(json.dumps({"text": text, "spans": byte_spans}, ensure_ascii=False))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("conversations")
    c.add_argument("file")
    c.add_argument("--rows", type=int, default=500)
    c.add_argument("--seed", type=int, default=3)
    r = sub.add_parser("render")
    r.add_argument("tokenizer")
    r.add_argument("template")
    r.add_argument("conversations")
    r.add_argument("--bos", default="<s>")
    r.add_argument("--eos", default="</s>")
    j = sub.add_parser("jinja")
    j.add_argument("cases")
    for name in ("record", "check"):
        sub.add_parser(name).add_argument("dir")
    a = ap.parse_args()
    if a.cmd == "record":
        record(a.dir)
    elif a.cmd == "check":
        check(a.dir)
    elif a.cmd == "conversations":
        conversations(a.file, a.rows, a.seed)
    elif a.cmd == "jinja":
        jinja(a.cases)
    else:
        render(a.tokenizer, a.template, a.conversations, a.bos, a.eos)


if __name__ == "__main__":
    main()
