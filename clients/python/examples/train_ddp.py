"""A small real training loop on shardfeed: DDP, 2 DataLoader workers,
checkpoints, commits, and resume.

    SHARDFEED_SOCKET=/tmp/feed.sock torchrun --standalone --nproc-per-node 2 train_ddp.py --checkpoint ckpt.pt

The dataset has a "tokens" column (fixed-size lists of token ids, e.g. an
MDS ndarray:int32:N column). The model is a tiny next-token predictor. Every
--checkpoint-every steps rank 0 saves the model, the optimizer and the
loader's state, all ranks meet at a barrier, and rank 0 commits the step to
the sidecar. Started again with the same --checkpoint, the job resumes at
the checkpoint's step — with any number of processes that divides the
dataset's numSplits: the global batches are the same.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import shardfeed


class TinyLM(torch.nn.Module):
    def __init__(self, vocab: int, dim: int = 32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(tokens))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint file: loaded if it exists, saved every --checkpoint-every steps")
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this step (0: the whole epoch), as a crash would")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=50000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)

    model = TinyLM(args.vocab)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    dataset = shardfeed.FeedDataset(columns=["tokens"])  # socket, rank and world size from the environment
    loader = shardfeed.FeedLoader(dataset, num_workers=args.workers)

    if os.path.exists(args.checkpoint):
        ckpt = torch.load(args.checkpoint, weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        loader.load_state_dict(ckpt["loader"])
        print(f"rank {rank}: resumed at epoch {ckpt['loader']['epoch']} step {ckpt['loader']['step']}", flush=True)

    start_epoch = loader.state_dict()["epoch"]
    started = time.monotonic()
    samples = 0
    for _ in range(start_epoch, args.epochs):
        for batch in loader:
            step = int(batch["_shardfeed_step"][0])
            tokens = batch["tokens"].long() % args.vocab
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            samples += len(tokens)
            print(f"rank {rank}: step {step} loss {loss.item():.4f} ids {batch['_shardfeed_index'].tolist()}", flush=True)

            done = step + 1
            if done % args.checkpoint_every == 0:
                if rank == 0:
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "loader": loader.state_dict()},
                               args.checkpoint + ".tmp")
                    os.replace(args.checkpoint + ".tmp", args.checkpoint)
                if distributed:
                    dist.barrier()  # every rank has finished the steps before `done`
                if rank == 0:
                    loader.commit()
                    print(f"rank 0: committed step {done}", flush=True)
            if args.max_steps and done >= args.max_steps:
                print(f"rank {rank}: stopping at step {done} (--max-steps)", flush=True)
                if distributed:
                    dist.destroy_process_group()
                return
    elapsed = time.monotonic() - started
    print(f"rank {rank}: finished {args.epochs} epoch(s), {samples} samples in {elapsed:.1f} s", flush=True)
    if distributed:
        dist.barrier()
        if rank == 0:
            loader.commit()  # the last epoch is complete
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
