#!/usr/bin/env python3
"""PyTorch FSDP2 twin of dpbench's --variable_update=fully_sharded on gpt, measured the way dpbench measures.

    torchrun --standalone --nproc_per_node=N scripts/bench/pytorch_fsdp.py --gpt_size 124m --batch_size 16
    torchrun --standalone --nproc_per_node=N scripts/bench/pytorch_fsdp.py --num_layers=32 --hidden_size=4096 \
        --num_heads=32 --batch_size 1   (a GPT of about 8B parameters)

The GPT is pytorch_gpt.py's (dpbench's network, parameter for parameter): --gpt_size's preset, each
of --num_layers, --num_heads and --hidden_size given overriding it; --model gpt (the only one) is
accepted for dpbench's flag set. FSDP2's fully_shard wraps
each block, then the root (wte, wpe, ln_f and the tied lm_head: dpbench's embedding and final-norm
units), as dpbench cuts gpt into units. --precision bf16 (the default): MixedPrecisionPolicy with
param_dtype bf16 and reduce_dtype --reduce_precision (fp32 by default, as dpbench's); fp32: no
policy. --reshard_after_forward (true: ZeRO-3; false: SHARD_GRAD_OP, as dpbench's flag);
--shard_group_size K < N: HSDP on a (N/K, K) device mesh (replicate across, shard within).
AdamW (foreach) on the sharded parameters. One process per GPU, weak scaling: --batch_size per
GPU. Warm-up steps skipped; then, after a device synchronisation and a barrier, host wall clock
over the measured steps (the slowest rank's); rank 0 prints one JSON line: pytorch_gpt.py's keys
plus world_size, the FSDP settings and torch.cuda.max_memory_allocated of rank 0 from the sharding
on (the whole model that each rank builds before sharding it is not counted)."""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt  # noqa: E402
import twin_timing  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt", choices=["gpt"], help="accepted for dpbench's flag set")
    p.add_argument("--gpt_size", default="124m", choices=list(pytorch_gpt.GPT_SIZES))
    p.add_argument("--num_layers", type=int, help="blocks (default: --gpt_size's)")
    p.add_argument("--num_heads", type=int, help="attention heads (default: --gpt_size's)")
    p.add_argument("--hidden_size", type=int, help="width d (default: --gpt_size's)")
    p.add_argument("--vocab_size", type=int, default=50304)
    p.add_argument("--seq_len", type=int, default=1024)
    p.add_argument("--batch_size", type=int, default=16, help="per GPU")
    p.add_argument("--dropout", type=float, default=0.0, help="as pytorch_gpt.py's (default 0: none)")
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--reduce_precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--reshard_after_forward", default="true", choices=["true", "false"])
    p.add_argument("--shard_group_size", type=int, default=0, help="0: every GPU (plain FSDP); K: HSDP")
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--num_batches", type=int, default=40)
    p.add_argument("--num_warmup_batches", type=int, default=10)
    a = p.parse_args()
    pytorch_gpt.resolve_model_arguments(p, a)  # the presets and the size checks, as the one-GPU twin's
    if a.num_batches < 1:
        p.error(f"--num_batches={a.num_batches}: must be at least 1")
    return a


def main():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    a = parse_args()
    device, rank, world = twin_timing.join_process_group()
    group = a.shard_group_size or world
    if world % group:
        raise SystemExit(f"--shard_group_size={group} does not divide the {world} GPUs")
    mesh = (init_device_mesh("cuda", (world,)) if group == world
            else init_device_mesh("cuda", (world // group, group), mesh_dim_names=("replicate", "shard")))

    torch.manual_seed(1234)
    model = pytorch_gpt.Gpt(a.vocab_size, a.seq_len, a.num_layers, a.num_heads, a.hidden_size, a.dropout).to(device)
    parameters = sum(q.numel() for q in model.parameters())
    policy = {}
    if a.precision == "bf16":
        reduce = torch.float32 if a.reduce_precision == "fp32" else torch.bfloat16
        policy = {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce)}
    reshard = a.reshard_after_forward == "true"
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, **policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, **policy)
    # Every rank built the whole model before sharding it (32 GB in fp32 for a GPT of 8B parameters);
    # sharding freed it, so the peak counted from here on is training's, not this set-up's.
    torch.cuda.reset_peak_memory_stats(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.learning_rate, weight_decay=a.weight_decay, foreach=True)

    torch.manual_seed(1234 + rank)
    tokens = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(inputs, targets)
        loss.backward()
        optimizer.step()
        return loss

    seconds, loss = twin_timing.timed_ranks(step, device, a.num_warmup_batches, a.num_batches)
    elapsed = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        items = a.batch_size * a.seq_len * world
        print(json.dumps({"framework": "pytorch-fsdp2", "torch": torch.__version__, "model": "gpt",
                          "gpt_size": a.gpt_size, "num_layers": a.num_layers, "num_heads": a.num_heads,
                          "hidden_size": a.hidden_size, "seq_len": a.seq_len, "dropout": a.dropout,
                          "batch_size": a.batch_size, "precision": a.precision,
                          "reduce_precision": a.reduce_precision, "reshard_after_forward": reshard,
                          "shard_group_size": group, "num_parameters": parameters, "world_size": world,
                          "num_gpus": world, "items_per_sec": items * a.num_batches / float(elapsed.item()),
                          "unit": "tokens/s", "total_time_s": float(elapsed.item()),
                          "final_loss": float(loss.detach().float()),
                          "max_memory_allocated_bytes": torch.cuda.max_memory_allocated()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
