"""Train a tiny next-token model on packed sequences (dataset.yaml), with no
Kubernetes: the sidecar packs the documents; this script uses what each
packed batch carries, commits every --commit-every steps, and a second run
resumes where the first committed.

    python3 make_data.py && shardfeed index -f dataset.yaml
    python3 train.py --max-steps 30     # stops after step 30, as a crash would
    python3 train.py                    # resumes at the last commit

examples/raw_text trains it on raw text the sidecar tokenizes and packs
(--column input_ids --vocab 257, run in that directory).

Each row holds several documents. Attention stays inside a document: the
mask is block-diagonal over the row's pieces (position_ids restart at 0 at
each, and cu_seqlens are their boundaries: what flash-attention's
variable-length kernels take, see shardfeed.batch_cu_seqlens). The loss
leaves out padding (loss_mask) and the first token of each document, which
nothing before it in the row predicts.
"""

from __future__ import annotations

import argparse
import logging
import os

import torch
import torch.nn.functional as F

import shardfeed

SEQ = 128
CHECKPOINT = "ckpt.pt"


class TinyLM(torch.nn.Module):
    """One attention layer over token and position embeddings."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, 64)
        self.pos = torch.nn.Embedding(SEQ, 64)
        self.qkv = torch.nn.Linear(64, 3 * 64)
        self.out = torch.nn.Linear(64, vocab)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(positions)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        # A piece starts where its positions restart: a token attends to
        # the tokens of its own piece before it, never across a boundary.
        piece = (positions == 0).cumsum(dim=1)
        causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
        mask = (piece[:, :, None] == piece[:, None, :]) & causal
        y = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], attn_mask=mask[:, None])[:, 0]
        return self.out(x + y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="start a new job instead of resuming the last one")
    parser.add_argument("--commit-every", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this step, as a crash would")
    parser.add_argument("--column", default="tokens", help="the packed column of token ids (spec.packing.column)")
    parser.add_argument("--vocab", type=int, default=1000, help="the token ids' range")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    dataset = shardfeed.FeedDataset.from_manifest("dataset.yaml", fresh=args.fresh)
    loader = shardfeed.FeedLoader(dataset)
    torch.manual_seed(0)
    model = TinyLM(args.vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    if os.path.exists(CHECKPOINT) and not args.fresh:
        ckpt = torch.load(CHECKPOINT, weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        loader.load_state_dict(ckpt["loader"])

    print(f"{len(loader)} steps left in the epoch", flush=True)
    documents = 0
    for batch in loader:
        tokens, positions = batch[args.column].long(), batch["position_ids"].long()
        mask = batch["loss_mask"].bool()
        # Token t+1 is predicted from t where it is a document's token and
        # not the first of its piece.
        keep = mask[:, 1:] & (positions[:, 1:] != 0)
        logits = model(tokens, positions)
        loss = F.cross_entropy(logits[:, :-1][keep], tokens[:, 1:][keep])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        documents += sum(len(d) for d in batch["doc_ids"])
        step = int(batch["_shardfeed_step"][0])
        done = step + 1
        if step == 0 or done % args.commit_every == 0 or len(loader) == 0:
            cu, longest = shardfeed.batch_cu_seqlens(batch, args.column)
            padding = 1 - mask.float().mean().item()
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "loader": loader.state_dict()},
                       CHECKPOINT + ".tmp")
            os.replace(CHECKPOINT + ".tmp", CHECKPOINT)
            loader.commit()
            print(f"step {done}: loss {loss.item():.3f}, {len(cu) - 1} segments in {tokens.shape[0]} rows "
                  f"(longest {longest}), {padding:.1%} padding, committed", flush=True)
        if args.max_steps and done >= args.max_steps:
            break
    print(f"{documents} document pieces trained on", flush=True)


if __name__ == "__main__":
    main()
