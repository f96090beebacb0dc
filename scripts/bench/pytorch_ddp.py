#!/usr/bin/env python3
"""PyTorch DistributedDataParallel twin of dpbench's multi-GPU runs, measured the way dpbench measures.

    torchrun --standalone --nproc_per_node=N scripts/bench/pytorch_ddp.py --model resnet50 --batch_size 64

One process per GPU (NCCL), weak scaling: --batch_size is per GPU, the global batch is N times it.
The models, synthetic data, optimizer, learning rate, loss and precision handling are those of the
single-GPU twins, imported from them: pytorch_cnn.py (resnet50/101/152, inception3, vgg16,
cifar10_cnn: SGD with momentum), pytorch_rnn.py (nmt, rnnlm: fused Adam) and pytorch_gpt.py (gpt:
GPT-2 as dpbench builds it, --gpt_size 124m by default, --num_layers/--num_heads/--hidden_size
overriding the preset, --vocab_size 50304, --seq_len 1024; fused AdamW with --weight_decay; bf16
AMP by default). --compile (gpt and the CNNs) compiles the model with torch.compile before DDP
wraps it, as nanoGPT runs DDP with compile. The model is initialised with --seed on every rank;
each rank's data, made with seed + rank, is resident on its GPU and differs per rank. DDP buckets
the gradients (--bucket_cap_mb, DDP's default 25) and all-reduces each bucket as soon as it is
ready, gradients being views of the buckets (gradient_as_bucket_view=True). --nproc_per_node=1 runs DDP with one rank, the baseline that
speedup_N = throughput_N / throughput_1 is computed against.

Warm-up steps are skipped; then, after a device synchronisation and a barrier, host wall clock over
the measured steps up to the same on every rank (the slowest rank's time counts); throughput =
global items / wall time (images for the CNNs, words = source + target tokens for nmt, tokens for
rnnlm and gpt: batch x seq_len x GPUs). Rank 0 prints one JSON line: the single-GPU twin's keys
(gpt: gpt_size, num_layers, num_heads, hidden_size, seq_len) plus num_gpus, world_size,
bucket_cap_mb, static_graph, the torch and NCCL versions and rank 0's
torch.cuda.max_memory_allocated (max_memory_allocated_bytes)."""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_cnn  # noqa: E402
import pytorch_gpt  # noqa: E402
import pytorch_rnn  # noqa: E402
import twin_timing  # noqa: E402

SEQUENCE_MODELS = ["nmt", "rnnlm"]
# Flags that pytorch_rnn.py and pytorch_gpt.py both declare, with their own defaults (rnnlm's LSTM
# layers, vocabulary and sequence; gpt's blocks, 50304 and 1024): declared once, filled in per model.
SHARED_MODEL_FLAGS = ("num_layers", "vocab_size", "seq_len")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50", choices=sorted(pytorch_cnn.IMAGE_SIZE) + SEQUENCE_MODELS + ["gpt"])
    p.add_argument("--batch_size", type=int, default=None,
                   help="per GPU; default: CNNs 64, nmt 384, rnnlm 512, gpt 16 (as the single-GPU twins)")
    p.add_argument("--precision", default=None, choices=["fp32", "tf32", "fp16", "bf16"],
                   help="default: CNNs fp32, nmt and rnnlm tf32, gpt bf16 (as the single-GPU twins); "
                        "fp16 and bf16: AMP, as the single-GPU twins run it")
    p.add_argument("--data_format", default="NCHW", choices=["NCHW", "NHWC"], help="CNNs only")
    p.add_argument("--image_size", type=int, default=None,
                   help="CNNs only: images of this size (e.g. 32, dpbench's ResNets on CIFAR data)")
    p.add_argument("--num_classes", type=int, default=None, help="CNNs only: classes (default 1000)")
    p.add_argument("--learning_rate", type=float, default=None,
                   help="default: CNNs 0.01 (SGD, momentum 0.9), nmt and rnnlm 0.001 (Adam), gpt 0.001 (AdamW)")
    p.add_argument("--num_batches", type=int, default=100)
    p.add_argument("--num_warmup_batches", type=int, default=10)
    p.add_argument("--bucket_cap_mb", type=float, default=25.0, help="DDP's bucket size (MiB)")
    p.add_argument("--static_graph", action="store_true", help="DDP static_graph=True")
    p.add_argument("--seed", type=int, default=1234,
                   help="model initialisation (same on every rank); data: seed + rank")
    pytorch_rnn.add_model_arguments(p)
    rnn_defaults = {name: p.get_default(name) for name in SHARED_MODEL_FLAGS}
    p.set_defaults(**dict.fromkeys(SHARED_MODEL_FLAGS))  # None: not given, so the model's default applies
    pytorch_gpt.add_model_arguments(p, skip=SHARED_MODEL_FLAGS)
    a = p.parse_args()
    sequence = a.model in SEQUENCE_MODELS
    if a.model != "gpt":
        for name, value in rnn_defaults.items():
            if getattr(a, name) is None:
                setattr(a, name, value)
    if sequence:
        pytorch_rnn.resolve_defaults(a)   # encoder_type, batch_size, embedding_dim, num_units
    a.batch_size = a.batch_size or {"nmt": 384, "rnnlm": 512, "gpt": 16}.get(a.model, 64)
    a.precision = a.precision or ("tf32" if sequence else "bf16" if a.model == "gpt" else "fp32")
    if a.learning_rate is None:
        a.learning_rate = 1e-3 if sequence or a.model == "gpt" else 0.01
    if a.num_batches < 1 or a.num_warmup_batches < 0 or a.batch_size < 1:
        p.error("--num_batches and --batch_size must be at least 1, --num_warmup_batches at least 0")
    if a.model == "gpt":
        pytorch_gpt.resolve_model_arguments(p, a)  # sizes from --gpt_size, vocabulary and sequence
    elif a.compile and sequence:
        p.error("--compile: gpt and the CNNs only (the LSTM twins run eager)")
    return a


def nccl_version():
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a build without NCCL
        return None
    if isinstance(version, tuple):  # (major, minor, patch[, suffix])
        return ".".join(str(part) for part in version if part != "")
    return str(version)


def main():
    a = parse_args()
    device, rank, world = twin_timing.join_process_group()
    sequence = a.model in SEQUENCE_MODELS

    # The same model on every rank (DDP also broadcasts rank 0's parameters); different data per rank.
    torch.manual_seed(a.seed)
    if a.model == "gpt":
        twin_timing.set_tf32(a.precision)
        model = pytorch_gpt.Gpt(a.vocab_size, a.seq_len, a.num_layers, a.num_heads, a.hidden_size,
                                a.dropout).to(device)
        torch.manual_seed(a.seed + rank)
        tokens = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len + 1), device=device)
        inputs = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
        items_per_rank = a.batch_size * a.seq_len
        unit = "tokens/s"
    elif sequence:
        pytorch_rnn.set_precision(a.precision)
        model = pytorch_rnn.build_model(a, device)
        torch.manual_seed(a.seed + rank)
        inputs, items_per_rank = pytorch_rnn.synthetic_inputs(a, device)
        unit = "words/s" if a.model == "nmt" else "tokens/s"
    else:
        pytorch_cnn.set_precision(a.precision)
        model, classes = pytorch_cnn.build(a.model, a.num_classes)
        model = model.to(device, memory_format=pytorch_cnn.memory_format(a.data_format))
        torch.manual_seed(a.seed + rank)
        images, labels = pytorch_cnn.synthetic_batch(a.model, a.batch_size, classes, device, a.data_format,
                                                     a.image_size)
        items_per_rank = a.batch_size
        unit = "images/s"
    parameters = sum(p.numel() for p in model.parameters())

    # Compiled before DDP wraps it: dynamo sees the forward run inside DDP's and splits the graph at
    # DDP's bucket boundaries (its DDPOptimizer), so each bucket's all-reduce still starts while the
    # rest of the backward runs. The optimizer takes the uncompiled module's parameters (the same
    # tensors).
    ddp = DistributedDataParallel(torch.compile(model) if a.compile else model,
                                  device_ids=[device.index], output_device=device.index,
                                  bucket_cap_mb=a.bucket_cap_mb, gradient_as_bucket_view=True,
                                  static_graph=a.static_graph)
    if a.model == "gpt":
        optimizer = twin_timing.fused_adamw(model, a.learning_rate, a.weight_decay)
        step = twin_timing.amp_step(ddp, optimizer, inputs, a.precision)
    elif sequence:
        optimizer = pytorch_rnn.make_optimizer(model, a.learning_rate)
        step = pytorch_rnn.make_step(ddp, optimizer, inputs, a.precision)
    else:
        optimizer = pytorch_cnn.make_optimizer(model, a.learning_rate)
        step = pytorch_cnn.make_step(ddp, optimizer, images, labels, a.precision)

    elapsed, loss = twin_timing.timed_ranks(step, device, a.num_warmup_batches, a.num_batches)

    # Outside the measurement: the slowest rank's time, and the loss averaged over the ranks.
    totals = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.MAX)
    elapsed = float(totals.item())
    mean_loss = loss.detach().float().reshape(1).clone()
    dist.all_reduce(mean_loss, op=dist.ReduceOp.SUM)
    final_loss = float(mean_loss.item()) / world

    if rank == 0:
        rate = items_per_rank * world * a.num_batches / elapsed
        result = {"framework": "pytorch-ddp", "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                  "nccl": nccl_version(), "model": a.model}
        if sequence:
            result.update(encoder_type=a.encoder_type, direction=a.direction if a.model == "nmt" else None)
        if a.model == "gpt":
            result.update(gpt_size=a.gpt_size, num_layers=a.num_layers, num_heads=a.num_heads,
                          hidden_size=a.hidden_size, vocab_size=a.vocab_size, seq_len=a.seq_len, dropout=a.dropout,
                          optimizer=a.optimizer, weight_decay=a.weight_decay)
        result.update(batch_size=a.batch_size, global_batch_size=a.batch_size * world, precision=a.precision)
        if sequence or a.model == "gpt":
            result.update(amp=a.precision in twin_timing.AMP_DTYPES)
        if sequence:
            result.update(lstm_dtype=pytorch_rnn.DTYPE_NAMES.get(model.lstm_dtype, str(model.lstm_dtype)))
        image = not sequence and a.model != "gpt"
        if image:
            result.update(data_format=a.data_format)
        if not sequence:
            result.update(compiled=a.compile)
        result.update(num_parameters=parameters)
        if image:
            result.update(images_per_sec=rate)
        result.update(items_per_sec=rate, unit=unit, total_time_s=elapsed, final_loss=final_loss,
                      num_gpus=world, world_size=world, bucket_cap_mb=a.bucket_cap_mb,
                      gradient_as_bucket_view=True, static_graph=a.static_graph,
                      num_batches=a.num_batches, num_warmup_batches=a.num_warmup_batches,
                      max_memory_allocated_bytes=torch.cuda.max_memory_allocated(device))
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
