"""Train a tiny next-token model on dataset.yaml, with no Kubernetes: the
Python client starts and owns a `shardfeed serve` for this process
(FeedDataset.from_manifest), commits every --commit-every steps, and a
second run resumes where the first committed.

    python3 train.py             # an epoch (and the next run resumes after it)
    python3 train.py --fresh     # a new job, from the beginning
    torchrun --standalone --nproc-per-node 2 train.py   # 2 ranks share one serve
"""

from __future__ import annotations

import argparse
import logging
import os

import pyarrow as pa
import torch
import torch.distributed as dist
import torch.nn.functional as F

import shardfeed

VOCAB = 1000
CHECKPOINT = "ckpt.pt"


def fixed_tokens(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A transform, on the client's thread pool: the JSON Lines' token lists
    (variable-length lists) as fixed-size lists, which become one tensor."""
    tokens = batch.column("tokens")
    fixed = pa.FixedSizeListArray.from_arrays(tokens.flatten().cast(pa.int64()), 32)
    return pa.RecordBatch.from_arrays([fixed], names=["tokens"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="start a new job instead of resuming the last one")
    parser.add_argument("--commit-every", type=int, default=25)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this step, as a crash would")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0

    dataset = shardfeed.FeedDataset.from_manifest("dataset.yaml", fresh=args.fresh, columns=["tokens"], transform=fixed_tokens)
    loader = shardfeed.FeedLoader(dataset)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    if os.path.exists(CHECKPOINT) and not args.fresh:
        ckpt = torch.load(CHECKPOINT, weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        loader.load_state_dict(ckpt["loader"])

    print(f"rank {rank}: {len(loader)} steps left in the epoch", flush=True)
    for batch in loader:
        tokens = batch["tokens"]
        loss = F.cross_entropy(model(tokens[:, :-1]).reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step = int(batch["_shardfeed_step"][0])
        done = step + 1
        if done % args.commit_every == 0 or len(loader) == 0:  # len: the steps left
            if distributed:
                dist.barrier()  # every rank finished the steps before `done`
            if rank == 0:
                # The checkpoint first, then the commit: the job resumes at
                # a step whose model is saved.
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "loader": loader.state_dict()},
                           CHECKPOINT + ".tmp")
                os.replace(CHECKPOINT + ".tmp", CHECKPOINT)
                loader.commit()
                print(f"step {done}: loss {loss.item():.3f}, committed", flush=True)
        if args.max_steps and done >= args.max_steps:
            break
    st = loader.stats()
    print(f"rank {rank}: {st.batches} batches, {st.consumed_rows} rows; waited {st.data_wait_seconds:.2f} s for data, "
          f"transform {st.transform_seconds:.2f} s", flush=True)
    if distributed:
        dist.barrier()  # rank 0's process owns the server: it leaves last
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
