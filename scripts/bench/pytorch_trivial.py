#!/usr/bin/env python3
"""PyTorch baseline for dpbench's `trivial` model: the same network (flatten 32x32x3 -> dense 256
-> ReLU -> dense 10, softmax cross-entropy, plain SGD), constant synthetic data in GPU memory, one
process per GPU training independently (no gradient exchange), measured as dpbench measures:
warm-up steps skipped, all processes synchronised, then host wall clock over the measured steps;
throughput = total images / wall time. Prints one JSON line."""
import argparse
import json
import time

import torch
import torch.multiprocessing as mp


def worker(rank, args, barrier, results):
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    torch.backends.cuda.matmul.allow_tf32 = False  # dpbench's fp32 is plain fp32
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3072, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    images = torch.rand(args.batch_size, 3, 32, 32, device=device) * 2 - 1
    labels = torch.randint(0, 10, (args.batch_size,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(args.num_warmup_batches):
        step()
    torch.cuda.synchronize(device)
    barrier.wait()
    start = time.perf_counter()
    for _ in range(args.num_batches):
        loss = step()
    torch.cuda.synchronize(device)
    barrier.wait()
    results[rank] = (start, time.perf_counter(), float(loss))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num_gpus", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_batches", type=int, default=100)
    parser.add_argument("--num_warmup_batches", type=int, default=10)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.num_gpus)
    manager = ctx.Manager()
    results = manager.dict()
    processes = [ctx.Process(target=worker, args=(rank, args, barrier, results)) for rank in range(args.num_gpus)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise SystemExit(f"worker failed with exit code {process.exitcode}")
    start = min(r[0] for r in results.values())
    end = max(r[1] for r in results.values())
    images = args.batch_size * args.num_gpus * args.num_batches
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "num_gpus": args.num_gpus,
                      "batch_size": args.batch_size, "images_per_sec": images / (end - start),
                      "total_time_s": end - start, "final_loss": [r[2] for r in results.values()][0]}))


if __name__ == "__main__":
    main()
