#!/usr/bin/env python3
"""PyTorch DistributedDataParallel twin of dpbench's multi-GPU runs, measured the way dpbench measures.

    torchrun --standalone --nproc_per_node=N scripts/bench/pytorch_ddp.py --model resnet50 --batch_size 64

One process per GPU (NCCL), weak scaling: --batch_size is per GPU, the global batch is N times it.
The models, synthetic data, optimizer, learning rate, loss and precision handling are those of the
single-GPU twins, imported from them: pytorch_cnn.py (resnet50/101/152, inception3, vgg16,
cifar10_cnn: SGD with momentum) and pytorch_rnn.py (nmt, rnnlm: fused Adam). Each rank's data is
resident on its GPU and differs per rank. DDP buckets the gradients (--bucket_cap_mb, DDP's default
25) and all-reduces each bucket as soon as it is ready, gradients being views of the buckets
(gradient_as_bucket_view=True). --nproc_per_node=1 runs DDP with one rank, the baseline that
speedup_N = throughput_N / throughput_1 is computed against.

Warm-up steps are skipped; then, after a device synchronisation and a barrier, host wall clock over
the measured steps up to the same on every rank (the slowest rank's time counts); throughput =
global items / wall time (images for the CNNs, words = source + target tokens for nmt, tokens for
rnnlm). Rank 0 prints one JSON line: the single-GPU twin's keys plus num_gpus, world_size,
bucket_cap_mb, static_graph and the torch and NCCL versions."""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_cnn  # noqa: E402
import pytorch_rnn  # noqa: E402
import twin_timing  # noqa: E402

SEQUENCE_MODELS = ["nmt", "rnnlm"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50", choices=sorted(pytorch_cnn.IMAGE_SIZE) + SEQUENCE_MODELS)
    p.add_argument("--batch_size", type=int, default=None,
                   help="per GPU; default: CNNs 64, nmt 384, rnnlm 512 (as the single-GPU twins)")
    p.add_argument("--precision", default=None, choices=["fp32", "tf32", "fp16", "bf16"],
                   help="default: CNNs fp32, nmt and rnnlm tf32 (as the single-GPU twins); "
                        "fp16 and bf16: AMP, as the single-GPU twins run it")
    p.add_argument("--data_format", default="NCHW", choices=["NCHW", "NHWC"], help="CNNs only")
    p.add_argument("--image_size", type=int, default=None,
                   help="CNNs only: images of this size (e.g. 32, dpbench's ResNets on CIFAR data)")
    p.add_argument("--num_classes", type=int, default=None, help="CNNs only: classes (default 1000)")
    p.add_argument("--learning_rate", type=float, default=None,
                   help="default: CNNs 0.01 (SGD, momentum 0.9), nmt and rnnlm 0.001 (Adam)")
    p.add_argument("--num_batches", type=int, default=100)
    p.add_argument("--num_warmup_batches", type=int, default=10)
    p.add_argument("--bucket_cap_mb", type=float, default=25.0, help="DDP's bucket size (MiB)")
    p.add_argument("--static_graph", action="store_true", help="DDP static_graph=True")
    p.add_argument("--seed", type=int, default=1234,
                   help="model initialisation (same on every rank); data: seed + rank")
    pytorch_rnn.add_model_arguments(p)
    a = p.parse_args()
    sequence = a.model in SEQUENCE_MODELS
    if sequence:
        pytorch_rnn.resolve_defaults(a)   # encoder_type, batch_size, embedding_dim, num_units
    a.batch_size = a.batch_size or (384 if a.model == "nmt" else 512 if a.model == "rnnlm" else 64)
    a.precision = a.precision or ("tf32" if sequence else "fp32")
    if a.learning_rate is None:
        a.learning_rate = 1e-3 if sequence else 0.01
    if a.num_batches < 1 or a.num_warmup_batches < 0 or a.batch_size < 1:
        p.error("--num_batches and --batch_size must be at least 1, --num_warmup_batches at least 0")
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
    if sequence:
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

    ddp = DistributedDataParallel(model, device_ids=[device.index], output_device=device.index,
                                  bucket_cap_mb=a.bucket_cap_mb, gradient_as_bucket_view=True,
                                  static_graph=a.static_graph)
    if sequence:
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
        result.update(batch_size=a.batch_size, global_batch_size=a.batch_size * world, precision=a.precision)
        if sequence:
            result.update(amp=a.precision in twin_timing.AMP_DTYPES,
                          lstm_dtype=pytorch_rnn.DTYPE_NAMES.get(model.lstm_dtype, str(model.lstm_dtype)))
        if not sequence:
            result.update(data_format=a.data_format, compiled=False)
        result.update(num_parameters=parameters)
        if not sequence:
            result.update(images_per_sec=rate)
        result.update(items_per_sec=rate, unit=unit, total_time_s=elapsed, final_loss=final_loss,
                      num_gpus=world, world_size=world, bucket_cap_mb=a.bucket_cap_mb,
                      gradient_as_bucket_view=True, static_graph=a.static_graph,
                      num_batches=a.num_batches, num_warmup_batches=a.num_warmup_batches)
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
