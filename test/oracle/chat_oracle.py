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
  chat_oracle.py jinja CASES
      reads JSON lines {"template", "messages", "vars"} and prints for each
      {"text", "spans"} as transformers renders it (its Jinja environment:
      trim_blocks, lstrip_blocks, loop controls, {% generation %} with the
      spans it marks, in bytes of the UTF-8 text), or {"error": message}.
"""

import argparse
import json
import random
import sys

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
    a = ap.parse_args()
    if a.cmd == "conversations":
        conversations(a.file, a.rows, a.seed)
    elif a.cmd == "jinja":
        jinja(a.cases)
    else:
        render(a.tokenizer, a.template, a.conversations, a.bos, a.eos)


if __name__ == "__main__":
    main()
