#!/usr/bin/env python3
"""PyTorch twins of dpbench's CNN models, measured the way dpbench measures.

The same networks (torchvision's resnet50/101/152, inception_v3 without the auxiliary head, vgg16,
and the Keras CIFAR-10 CNN), the same batch, optimizer (SGD with momentum) and precision, synthetic
data resident on the GPU, eager or torch.compile. Warm-up steps are skipped; then host wall clock
over the measured steps after a device synchronisation; throughput = images / wall time.
--forward_only is dpbench's inference: the model in eval mode (batch norm on its running
statistics, no dropout), forward pass and loss under torch.inference_mode(), nothing else.
Prints one JSON line."""
import argparse
import json
import time

import torch
import torch.nn as nn
import torchvision

IMAGE_SIZE = {"resnet50": 224, "resnet101": 224, "resnet152": 224, "vgg16": 224, "inception3": 299,
              "cifar10_cnn": 32}


def cifar10_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * 6 * 6, 512), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(512, 10))


def build(name, num_classes=None):
    """The model and its class count; num_classes overrides ImageNet's 1000 (e.g. 10 for CIFAR)."""
    if name == "cifar10_cnn":
        return cifar10_cnn(), 10
    classes = num_classes or 1000
    if name == "inception3":
        return torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False,
                                               num_classes=classes), classes
    return getattr(torchvision.models, name)(weights=None, num_classes=classes), classes


def set_precision(precision):
    """cuDNN autotuning on; TF32 for GEMMs and convolutions only with --precision=tf32."""
    torch.backends.cudnn.benchmark = True
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def memory_format(data_format):
    return torch.channels_last if data_format == "NHWC" else torch.contiguous_format


def make_optimizer(model, learning_rate):
    return torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9)


def synthetic_batch(name, batch_size, classes, device, data_format, image_size=None):
    """Images uniform in [-1, 1) and random labels, resident on `device`; image_size overrides the
    model's usual size (e.g. 32 for ResNets on CIFAR-shaped data)."""
    size = image_size or IMAGE_SIZE[name]
    images = (torch.rand(batch_size, 3, size, size, device=device) * 2 - 1).to(memory_format=memory_format(data_format))
    labels = torch.randint(0, classes, (batch_size,), device=device)
    return images, labels


def make_step(model, optimizer, images, labels, precision, compiled=False, compile_mode=None):
    """One training step (forward, loss, backward, update) as a function returning the loss. fp16 and
    bf16 run under autocast; fp16 scales the loss (GradScaler). `model` may be wrapped (DDP).
    compile_mode is torch.compile's mode (None: its default)."""
    loss_fn = nn.CrossEntropyLoss()
    autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def forward_backward():
        with torch.autocast("cuda", dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        return loss

    step_fn = torch.compile(forward_backward, mode=compile_mode) if compiled else forward_backward

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = step_fn()
        scaler.step(optimizer)
        scaler.update()
        return loss

    return step


def make_inference_step(model, images, labels, precision, compiled=False, compile_mode=None):
    """One inference step (forward and loss, as dpbench's --forward_only computes) returning the loss:
    eval mode, torch.inference_mode(), autocast for fp16 and bf16."""
    model.eval()
    loss_fn = nn.CrossEntropyLoss()
    autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)

    def forward():
        with torch.autocast("cuda", dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            return loss_fn(model(images), labels)

    forward_fn = torch.compile(forward, mode=compile_mode) if compiled else forward

    def step():
        with torch.inference_mode():
            return forward_fn()

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="resnet50", choices=sorted(IMAGE_SIZE))
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16", "bf16"])
    parser.add_argument("--data_format", default="NCHW", choices=["NCHW", "NHWC"])
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--compile_mode", default=None,
                        choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                        help="torch.compile's mode (implies --compile); reduce-overhead replays CUDA graphs")
    parser.add_argument("--forward_only", action="store_true",
                        help="inference: eval mode, forward and loss under torch.inference_mode()")
    parser.add_argument("--num_batches", type=int, default=100)
    parser.add_argument("--num_warmup_batches", type=int, default=10)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--profile_step", type=int, default=0,
                        help="run one extra step bracketed by cudaProfilerStart/Stop (for ncu "
                             "--profile-from-start off) after the measurement; 0: none")
    args = parser.parse_args()
    args.compile = args.compile or args.compile_mode is not None

    set_precision(args.precision)
    device = torch.device("cuda")
    model, classes = build(args.model)
    model = model.to(device, memory_format=memory_format(args.data_format))
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = make_optimizer(model, args.learning_rate)
    images, labels = synthetic_batch(args.model, args.batch_size, classes, device, args.data_format)
    if args.forward_only:
        step = make_inference_step(model, images, labels, args.precision, compiled=args.compile,
                                    compile_mode=args.compile_mode)
    else:
        step = make_step(model, optimizer, images, labels, args.precision, compiled=args.compile,
                         compile_mode=args.compile_mode)

    for _ in range(args.num_warmup_batches):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.num_batches):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if args.profile_step:
        torch.cuda.profiler.start()
        step()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                      "model": args.model, "batch_size": args.batch_size, "precision": args.precision,
                      "data_format": args.data_format, "compiled": args.compile,
                      "compile_mode": args.compile_mode or ("default" if args.compile else None),
                      "forward_only": args.forward_only, "num_parameters": parameters,
                      "images_per_sec": args.batch_size * args.num_batches / elapsed, "total_time_s": elapsed,
                      "final_loss": float(loss.detach()),
                      "max_memory_allocated_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
