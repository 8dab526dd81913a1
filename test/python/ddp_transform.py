"""Two ranks under torchrun read with a transform that fails on some
batches (on_transform_error="skip_batch"), all-reduce once per step (a rank
missing a batch would hang or mismatch), save the loader's state and stop
at --stop-at, or resume from --state."""

from __future__ import annotations

import argparse
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.distributed as dist

import shardfeed

BAD = {137, 611, 1000}


def failing(rb: pa.RecordBatch) -> pa.RecordBatch:
    if set(rb.column("_shardfeed_index").to_pylist()) & BAD:
        raise RuntimeError("cannot transform")
    return pa.RecordBatch.from_arrays([rb.column("id"), pc.multiply(rb.column("x"), 2.0)], names=["id", "x2"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--stop-at", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(transform=failing, transform_threads=2, on_transform_error="skip_batch"),
                                  num_workers=1)
    if os.path.exists(args.state):
        loader.load_state_dict(json.load(open(args.state)))
    reduces = 0
    for batch in loader:
        step = int(batch["_shardfeed_step"][0])
        total = torch.tensor([float(len(batch["x2"]))])
        dist.all_reduce(total)  # both ranks hand a batch of the same size to every step
        assert total.item() == 24, total
        reduces += 1
        pad = bool(batch["_shardfeed_pad"].all())
        print(f"rank {rank} step {step} pad {pad} ids {batch['_shardfeed_index'].tolist()}", flush=True)
        if args.stop_at and step + 1 >= args.stop_at:
            if rank == 0:
                json.dump(loader.state_dict(), open(args.state, "w"))
            dist.barrier()
            dist.destroy_process_group()
            return
    print(f"rank {rank} in step: {reduces} all-reduces", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
