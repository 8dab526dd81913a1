"""Ranks of a torch DeviceMesh under torchrun read their batches with
FeedDataset(device_mesh=...): each prints the ids of every batch with its
data-parallel rank, and checks over the mesh's non-data-parallel groups
that its replicas hold the very same batch."""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

import shardfeed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mesh", required=True, help="e.g. pp=2,dp=2,tp=2")
    args = parser.parse_args()
    dims = [d.split("=") for d in args.mesh.split(",")]
    names, shape = tuple(n for n, _ in dims), tuple(int(s) for _, s in dims)
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    rank = dist.get_rank()
    ds = shardfeed.FeedDataset(device_mesh=mesh, output="torch")
    loader = shardfeed.FeedLoader(ds)
    steps = len(loader)
    # The ranks that differ only in non-data-parallel dimensions form one
    # replication group, which must see identical batches: equal along
    # each such dimension, so equal across the group.
    groups = [mesh.get_group(mesh_dim=n) for n in names if not shardfeed.dataset.is_data_parallel(n)]
    for batch in loader:
        ids = batch["_shardfeed_index"]
        for group in groups:
            lo, hi = ids.clone(), ids.clone()
            dist.all_reduce(lo, op=dist.ReduceOp.MIN, group=group)
            dist.all_reduce(hi, op=dist.ReduceOp.MAX, group=group)
            assert torch.equal(lo, ids) and torch.equal(hi, ids), f"rank {rank}: a replica of its group holds another batch"
        step = int(batch["_shardfeed_step"][0])
        print(f"rank {rank} dp {ds.dp_rank}/{ds.dp_size} step {step} ids {ids.tolist()}", flush=True)
    print(f"rank {rank} read {steps} steps", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
