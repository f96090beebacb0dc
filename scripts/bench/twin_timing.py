"""What dpbench's PyTorch twins share: one training step under PyTorch AMP as the twins define it
(autocast in the precision's 16-bit type, fp32 weights, GradScaler for fp16), and the measurement
as dpbench makes it (warm-up steps run and skipped, the device synchronised, host wall clock over
the measured steps, then an optional step bracketed for a profiler); for the sequence twins also
their TF32 rule, synthetic sentence pairs, fused Adam and AdamW, and the JSON line they print."""

import contextlib
import json
import time

import torch

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
PRECISIONS = ["fp32", "tf32", "bf16", "fp16"]


def add_measurement_arguments(parser, learning_rate, num_batches, precision="tf32"):
    """The flags every sequence twin takes, named as dpbench's: --precision, --learning_rate,
    --num_batches, --num_warmup_batches and --profile_step, with the twin's defaults."""
    parser.add_argument("--precision", default=precision, choices=PRECISIONS,
                        help="fp32; tf32; bf16 or fp16: AMP (autocast, fp32 weights; fp16 with GradScaler)")
    parser.add_argument("--learning_rate", type=float, default=learning_rate)
    parser.add_argument("--num_batches", type=int, default=num_batches)
    parser.add_argument("--num_warmup_batches", type=int, default=10)
    parser.add_argument("--profile_step", type=int, default=0,
                        help="run one extra step bracketed by cudaProfilerStart/Stop (for ncu "
                             "--profile-from-start off) after the measurement; 0: none")


def set_tf32(precision):
    """TF32 for GEMMs and cuDNN with --precision=tf32 and under AMP (bf16, fp16: for the math
    autocast leaves in fp32, as an AMP user has it), not with fp32."""
    tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def sentence_pairs(a, device):
    """Synthetic translation inputs resident on `device`, time-major: ((src, tgt_in, tgt_out), words
    per step), words counting source + target tokens per sentence pair as dpbench does."""
    B = a.batch_size
    src = torch.randint(0, a.src_vocab_size, (a.src_max_len, B), device=device)
    tgt = torch.randint(0, a.tgt_vocab_size, (a.tgt_max_len + 1, B), device=device)
    return (src, tgt[:-1], tgt[1:]), B * (a.src_max_len + a.tgt_max_len)


def fused_adam(model, learning_rate):
    """fused=True: one multi-tensor kernel per step, the strongest stock Adam (dpbench's is fused)."""
    return torch.optim.Adam(model.parameters(), lr=learning_rate, fused=True)


def fused_adamw(model, learning_rate, weight_decay):
    """AdamW, fused as fused_adam, over every parameter in one group (biases, norms and embeddings
    decay too, as in dpbench's AdamW); betas and eps are PyTorch's defaults, written out because
    dpbench states its own."""
    return torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=weight_decay, fused=True)


def num_parameters(network):
    """The network's parameter count; parameters() yields a tensor shared by two modules (a tied
    embedding and output projection) once, so it is counted once."""
    return sum(q.numel() for q in network.parameters())


def items_per_sec(a, items, elapsed):
    """Throughput over the measured steps: `items` per step, a.num_batches steps in `elapsed` s."""
    return items * a.num_batches / elapsed


def result_line(a, network, items, elapsed, loss, **fields):
    """The JSON line a sequence twin prints: the framework, the twin's own `fields` (model,
    encoder_type, ...), then its batch, precision, the network's parameter count and what `measure`
    returned (items per step as `items`), and the caching allocator's peak of the whole run
    (torch.cuda.max_memory_allocated), which dpbench's memory peak is compared against."""
    return json.dumps({"framework": "pytorch", "torch": torch.__version__, **fields, "batch_size": a.batch_size,
                       "precision": a.precision, "amp": a.precision in AMP_DTYPES,
                       "num_parameters": num_parameters(network),
                       "items_per_sec": items_per_sec(a, items, elapsed), "total_time_s": elapsed,
                       "final_loss": float(loss.detach()),
                       "max_memory_allocated_bytes": torch.cuda.max_memory_allocated()})


def amp_step(forward, optimizer, inputs, precision):
    """A step function: zero the gradients, forward(*inputs) under autocast (bf16, fp16) or as is
    (fp32, tf32), backward through GradScaler (scaling only for fp16), optimizer step. Returns the
    loss tensor."""
    autocast_dtype = AMP_DTYPES.get(precision)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext():
            loss = forward(*inputs)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # fused Adam unscales the gradients itself
        scaler.update()
        return loss

    return step


def measure(step, num_warmup_batches, num_batches, profile_step=0):
    """Runs the warm-up steps, then times num_batches steps on the host's clock between device
    synchronisations; with profile_step, one more step between cudaProfilerStart and Stop (for
    ncu --profile-from-start off). Returns (elapsed seconds, the last measured step's loss)."""
    for _ in range(num_warmup_batches):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    loss = None
    for _ in range(num_batches):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if profile_step:
        torch.cuda.profiler.start()
        step()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return elapsed, loss


def join_process_group():
    """This process's rank in an NCCL process group (torchrun's environment, else a group of one):
    its CUDA device, rank and world size."""
    import os

    import torch.distributed as dist

    if "RANK" not in os.environ:  # run without torchrun: one rank
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    return torch.device("cuda", local_rank), dist.get_rank(), dist.get_world_size()

def timed_ranks(step, device, warmup, steps):
    """`warmup` untimed calls of step(), then `steps` timed ones between barriers of every rank:
    this rank's seconds and the last loss."""
    import torch.distributed as dist

    def synchronize():
        torch.cuda.synchronize()
        dist.barrier(device_ids=[device.index])
        torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    synchronize()
    start = time.perf_counter()
    loss = None
    for _ in range(steps):
        loss = step()
    synchronize()
    return time.perf_counter() - start, loss
