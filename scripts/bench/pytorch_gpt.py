#!/usr/bin/env python3
"""PyTorch twin of dpbench's GPT-2 (--model=gpt), measured the way dpbench measures.

The network is dpbench's, parameter for parameter: GPT-2's decoder in nanoGPT's shape. A token
embedding wte (V, d) plus learned positions wpe (T, d), then dropout; L pre-norm blocks, each
x = x + attn(ln_1(x)) and x = x + mlp(ln_2(x)), attn one fused QKV nn.Linear(d, 3d), causal
multi-head attention through F.scaled_dot_product_attention and an output nn.Linear(d, d), mlp
nn.Linear(d, 4d), GELU (tanh form) and nn.Linear(4d, d), every Linear with a bias; LayerNorms with
bias, eps 1e-5; a final ln_f and the bias-free output projection lm_head, whose weight is wte's.
--dropout (default 0: none) after the embedding sum, on the attention probabilities and after each
block's two output projections. Loss: the mean cross-entropy over the B x T next tokens. AdamW
(fused) with --weight_decay on every parameter. Parameters: V d + T d + L (12 d^2 + 13 d) + 2 d,
the tied matrix once: 124,475,904 at --gpt_size=124m (num_parameters in the JSON line).

--precision: bf16 (the default) or fp16: PyTorch AMP (autocast; fp32 weights, gradients and AdamW
state; fp16 with GradScaler); tf32; fp32 (no TF32). --compile: torch.compile the model, loss
included (default mode). Synthetic tokens: (B, T + 1) random ids resident on the GPU, each row's
first T the inputs and last T the targets. Warm-up steps skipped; then host wall clock over the
measured steps after a device synchronisation. Prints one JSON line: items_per_sec (tokens/s),
flops_per_token, tflops_per_sec, peak_tflops and mfu (null on a GPU missing from the peak table)."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from twin_timing import (add_measurement_arguments, amp_step, fused_adamw, items_per_sec, measure, num_parameters,
                         result_line, set_tf32)

GPT_SIZES = {"124m": (12, 12, 768), "350m": (24, 16, 1024), "774m": (36, 20, 1280), "1558m": (48, 25, 1600)}

# Dense peak TFLOP/s of one GPU as dpbench's engine/machine/gpu_peaks.cpp has them (NVIDIA's
# datasheets; tensor cores at half the 2:4-sparsity figure), matched as there: the first entry whose
# name part the device's name contains, so "H100 PCIe" before "H100". fp16's peak is bf16's.
GPU_PEAKS = [  # (name part, fp32 without tensor cores, tf32, bf16 and fp16)
    ("GH200", 67, 494.5, 989.5),
    ("H200", 67, 494.5, 989.5),
    ("H100 PCIe", 51, 378, 756.5),
    ("H100 NVL", 60, 417.5, 835.5),
    ("H100", 67, 494.5, 989.5),
    ("A100", 19.5, 156, 312),
]


def flops_per_token(parameters, layers, seq_len, hidden):
    """Training FLOPs per token, the count dpbench makes for --model=gpt: 6 N + 6 L T d.

    6 N: each parameter's multiply-add per token, 2 FLOPs forward and 4 backward (input and weight
    gradients), N every parameter with the tied matrix once (its products are lm_head's; wpe, the
    biases and the norms are in N as GPT FLOP counts usually have them, though they do no
    products). 6 L T d: causal
    attention's two products, scores Q K^T and the weighted sum P V, over the visible half of the
    keys: forward 2 x 2 x (T / 2) x d per token and layer, backward twice that. Softmax, norms and
    element-wise work are not counted."""
    return 6 * parameters + 6 * layers * seq_len * hidden


def peak_tflops(precision):
    """This GPU's dense peak for the math `precision` runs (bf16 and fp16 on tensor cores under
    AMP), or None for a GPU missing from GPU_PEAKS."""
    name = torch.cuda.get_device_name()
    for part, fp32, tf32, half in GPU_PEAKS:
        if part in name:
            return {"fp32": fp32, "tf32": tf32}.get(precision, half)
    return None


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):  # (B, T, d)
        B, T, d = x.shape
        # (B, T, 3d) holds q, k, v one after the other, each d as heads x d/heads: three (B, heads, T, d/heads).
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, d)
        return F.dropout(self.proj(y), self.dropout, self.training)


class Block(nn.Module):
    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.dropout = dropout
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, dropout)
        self.ln_2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.fc_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):  # (B, T, d)
        x = x + self.attn(self.ln_1(x))
        h = F.gelu(self.fc(self.ln_2(x)), approximate="tanh")  # (B, T, 4d)
        return x + F.dropout(self.fc_proj(h), self.dropout, self.training)


class Gpt(nn.Module):
    def __init__(self, vocab, seq_len, layers, heads, hidden, dropout):
        super().__init__()
        self.dropout = dropout
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one (V, d) parameter, its gradient the sum of both uses
        # GPT-2's N(0, 0.02) for every matrix and table, biases 0: the work is the same under any
        # initialisation, but a N(0, 1) tied table would start the loss in the hundreds, not near ln V.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, tokens, targets):  # (B, T) each
        T = tokens.shape[1]
        # Positions 0..T-1 are wpe's first T rows as they are: no index tensor to look up.
        x = F.dropout(self.wte(tokens) + self.wpe.weight[:T], self.dropout, self.training)  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V); 16-bit under autocast
        # autocast runs cross_entropy in fp32 on the 16-bit logits, as an AMP user has it.
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


# The defaults of the flags whose names pytorch_rnn.py also declares (with rnnlm's defaults): a parser
# holding both model sets, as pytorch_ddp.py's, declares them once and fills in gpt's from here.
SHARED_DEFAULTS = {"vocab_size": 50304, "seq_len": 1024}


def add_model_arguments(p, skip=()):
    """The network's and the optimizer's flags, named as dpbench's; a name in `skip` is left out
    (a parser that already declares it). --vocab_size, --seq_len, --num_layers, --num_heads and
    --hidden_size default to None: resolve_model_arguments fills them in (the last three from
    --gpt_size's preset)."""
    def add(flag, **kwargs):  # the flag spelled out in full: compare_pytorch.sh finds a twin's flags by "--name"
        if flag[2:] not in skip:
            p.add_argument(flag, **kwargs)

    add("--gpt_size", default="124m", choices=list(GPT_SIZES),
        help="layers/heads/hidden: " + ", ".join(f"{k} {l}/{h}/{d}" for k, (l, h, d) in GPT_SIZES.items()))
    add("--num_layers", type=int, help="blocks (default: --gpt_size's)")
    add("--num_heads", type=int, help="attention heads (default: --gpt_size's)")
    add("--hidden_size", type=int, help="width d (default: --gpt_size's)")
    add("--vocab_size", type=int, help="default 50304: GPT-2's 50,257 tokens padded to a multiple of 64")
    add("--seq_len", type=int, help="tokens per sample, also wpe's rows (default 1024)")
    add("--dropout", type=float, default=0.0)
    add("--optimizer", default="adamw", choices=["adamw"], help="accepted for dpbench's flag set")
    add("--weight_decay", type=float, default=0.01)
    add("--compile", action="store_true", help="torch.compile the model (default mode)")


def resolve_model_arguments(p, a):
    """Fills in the defaults add_model_arguments left open, then checks the sizes (p.error)."""
    for name, value in SHARED_DEFAULTS.items():
        if getattr(a, name) is None:
            setattr(a, name, value)
    # Each of the three given overrides the preset's.
    for name, preset in zip(("num_layers", "num_heads", "hidden_size"), GPT_SIZES[a.gpt_size]):
        if getattr(a, name) is None:
            setattr(a, name, preset)
    for name in ("num_layers", "num_heads", "hidden_size", "vocab_size", "seq_len", "batch_size"):
        if getattr(a, name) < 1:
            p.error(f"--{name}={getattr(a, name)}: must be at least 1")
    if not 0 <= a.dropout < 1:
        p.error(f"--dropout={a.dropout}: must be in [0, 1)")
    if a.hidden_size % a.num_heads:
        p.error(f"--hidden_size={a.hidden_size} is not a multiple of --num_heads={a.num_heads}")


def parse_arguments():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt", choices=["gpt"], help="accepted for dpbench's flag set")
    p.add_argument("--batch_size", type=int, default=16)
    add_model_arguments(p)
    add_measurement_arguments(p, learning_rate=1e-3, num_batches=40, precision="bf16")
    a = p.parse_args()
    resolve_model_arguments(p, a)
    return a


def main():
    a = parse_arguments()
    set_tf32(a.precision)
    device = torch.device("cuda")
    model = Gpt(a.vocab_size, a.seq_len, a.num_layers, a.num_heads, a.hidden_size, a.dropout).to(device)
    tokens = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len + 1), device=device)
    inputs = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
    items = a.batch_size * a.seq_len
    optimizer = fused_adamw(model, a.learning_rate, a.weight_decay)
    forward = torch.compile(model) if a.compile else model
    step = amp_step(forward, optimizer, inputs, a.precision)
    elapsed, loss = measure(step, a.num_warmup_batches, a.num_batches, a.profile_step)

    flops = flops_per_token(num_parameters(model), a.num_layers, a.seq_len, a.hidden_size)
    flops_per_sec = flops * items_per_sec(a, items, elapsed)
    peak = peak_tflops(a.precision)
    print(result_line(a, model, items, elapsed, loss, model="gpt", gpt_size=a.gpt_size, num_layers=a.num_layers,
                      num_heads=a.num_heads, hidden_size=a.hidden_size, vocab_size=a.vocab_size, seq_len=a.seq_len,
                      dropout=a.dropout, optimizer=a.optimizer, weight_decay=a.weight_decay, compiled=a.compile,
                      flops_per_token=flops, tflops_per_sec=flops_per_sec / 1e12, peak_tflops=peak,
                      mfu=flops_per_sec / (peak * 1e12) if peak else None))


if __name__ == "__main__":
    main()
