"""Train the SHA-RNN on any byte corpus: `shazip train CORPUS... --config small --out DIR`.

Read top to bottom: options, set-up (data, model, optimizer, resume), the loop (truncated BPTT
over B parallel streams, state carried across segments and detached), checkpoints, export. The
command line that fills the options is command.py.

Training follows the SHA-RNN recipe: segment length jitter as in the reference implementation
(bptt, halved 5 % of the time, plus N(0, 5) noise); LAMB with a minimum trust ratio (0.25);
linear warm-up then a constant rate; gradient clipping; the over-parameterized value gate,
collapsed at export. bf16 autocast (on by default on a GPU) keeps fp32 master weights; the
int8 export quantizes those, so it is exact however the run computed.

Determinism: given the same options, a run split by `--resume` lands on the same weights as an
uninterrupted one on CPU: the checkpoint holds weights, optimizer, step, both RNGs, the data
position and the carried state. Wall-clock events (checkpoints, logging) never touch them. On a
GPU a resumed run continues from the same state, but cuDNN's kernels are not bit-reproducible,
so the weights drift apart from an uninterrupted run's as two GPU runs' do. The checkpoint is
stored in pieces (checkpoint.py) so that it comes back from a lent GPU machine, and resumes on
either device.

Under `torchrun --nproc_per_node=N` the same command trains with DistributedDataParallel
(gloo on CPU, nccl on CUDA): every rank reads its own streams; rank 0 writes checkpoints and
metrics, after gathering every rank's carried state so that resume stays exact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import checkpoint as pieces
from .data import ByteStreams, Corpus
from ..errors import UsageError
from ..model.config import PRESETS, get_config
from ..options import DEVICES
from ..model.sharnn import SHARNN, State
from ..model.file import load_model, save_model
from .optim import make_optimizer


DEFAULT_VALID_BYTES = 2_000_000


@dataclass
class TrainArgs:
    corpus: tuple[str, ...]
    out: str
    config: str = "small"
    name: str | None = None
    batch: int = 32
    bptt: int = 128
    lr: float = 2e-3
    warmup: int = 200
    ref_batch: int | None = None  # --lr and --warmup are for this many streams in all (scaled to --batch)
    clip: float = 0.25
    optimizer: str = "lamb"
    weight_decay: float = 0.0
    dropout: float | None = None
    mem_len: int | None = None
    init: str | None = None
    valid_bytes: int | None = None  # None: min(2 MB, 5 % of the corpus)
    steps: int | None = None
    qat_steps: int = 0
    cooldown: int = 0
    int8: bool = False
    minutes: float | None = None
    checkpoint_minutes: float = 5.0
    checkpoint: bool = True  # False: no checkpoint at all (a lend's run, or the sweep's trials)
    eval_every: int = 500
    eval_minutes: float | None = None
    eval_bytes: int | None = None  # None: all the held-out bytes at every evaluation
    log_every: int = 20
    snapshot: str | None = None
    compile: bool = False
    threads: int | None = None
    device: str = "auto"
    bf16: bool | None = None  # None: on where the device is a GPU
    seed: int = 1234
    resume: bool = False
    progress: bool = True


# ----------------------------------------------------------------------------- helpers

def seq_len_jitter(rng: np.random.Generator, bptt: int) -> int:
    """Reference SHA-RNN/AWD-LSTM jitter: bptt (or bptt/2 with p=0.05) + N(0, 5), at least 5,
    at most bptt + 20 (bounds the memory of one step)."""
    base = bptt if rng.random() < 0.95 else bptt / 2
    return int(min(max(5, int(rng.normal(base, 5))), bptt + 20))


def bits_per_byte(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1)) / math.log(2)


@torch.no_grad()
def evaluate(model: SHARNN, corpus: Corpus, lo: int, hi: int, bptt: int, streams: int = 16) -> float:
    """bits/byte over bytes [lo, hi) read as `streams` contiguous streams (memory carried); the
    sum stays on the device until the end, so a GPU evaluates without a wait a segment."""
    model.eval()
    streams = max(1, min(streams, (hi - lo) // (bptt + 1)))
    device = model.embed.weight.device
    data = ByteStreams(corpus, lo, hi, streams, device=device)
    state, total, count = model.init_state(streams, device), torch.zeros((), dtype=torch.float64, device=device), 0
    while data.pos + bptt + 1 <= data.span:
        x, _ = data.next_batch(bptt)
        logits, state = model(x[:, :-1], state)
        total += bits_per_byte(logits, x[:, 1:]).double() * x[:, 1:].numel()
        count += x[:, 1:].numel()
    model.train()
    return float(total) / max(count, 1)


def corpus_identity(paths, corpus: Corpus) -> list[list]:
    """Each corpus file's name and (decompressed) size: what a resume must find again. Not the
    path: a run checkpointed on a GPU machine resumes here with its texts in another folder."""
    return [[Path(p).name, len(part)] for p, part in zip(paths, corpus.parts)]


def scaled_for_batch(lr: float, warmup: int, batch: int, ref_batch: int) -> tuple[float, int]:
    """The learning rate and warm-up for `batch` streams from those tuned for `ref_batch`: the
    rate by the square root of the ratio (LAMB's rule, You et al. 2019: the gradient's noise
    falls as the square root of the batch) and the warm-up steps by its inverse, so a larger
    batch warms up over fewer steps but more bytes (benchmarks/batch_study.py measures it)."""
    k = batch / ref_batch
    return lr * math.sqrt(k), max(1, round(warmup / math.sqrt(k)))


def lr_at(args: TrainArgs, step: int) -> float:
    """Linear warm-up, then constant; with --cooldown K, linear decay over the last K of
    --steps (to lr / K at the last step). A constant-rate run can be continued at will and
    finished by a cooldown branch from any checkpoint."""
    lr = args.lr * min(1.0, (step + 1) / max(1, args.warmup))
    if args.cooldown and args.steps is not None:
        lr *= min(1.0, (args.steps - step) / args.cooldown)
    return lr


def export(model: SHARNN, path: Path, name: str, info: dict, weights: str) -> str:
    """Writes the model as shipped (the value gate collapsed, on a copy: training goes on) to
    `path`, atomically; returns its sha256."""
    shipped = SHARNN(model.cfg)
    shipped.load_state_dict(model.state_dict())
    shipped.collapse_vs()
    return save_model(shipped, path, name, {"params": shipped.num_params(), **info}, weights=weights)


class Stop:
    """Set by SIGINT/SIGTERM; the loop finishes its step, checkpoints and exits cleanly.
    `restore` puts the previous handlers back (train() is also called in-process)."""

    def __init__(self) -> None:
        self.flag = False
        self.saved: dict = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.saved[sig] = signal.signal(sig, self._set)

    def restore(self) -> None:
        for sig, old in self.saved.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)
        self.saved.clear()

    def _set(self, *_) -> None:
        self.flag = True


# ----------------------------------------------------------------------------- training

def _keep_earlier_export(path: Path) -> Path | None:
    """An export about to be written over (a resumed or longer run) stays, as NAME-ID.safetensors
    (its own id's first 12 hex digits): archives made with it name its id and decode only with
    it. Linked, not copied; returns where it is kept (None: there was none)."""
    if not path.exists():
        return None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    kept = path.with_name(f"{path.stem}-{digest[:12]}{path.suffix}")
    if not kept.exists():
        os.link(path, kept)
    return kept


def train(args: TrainArgs) -> dict:
    """Runs (or resumes) a training run; returns the final metrics record. In-process callers get
    their signal handlers and torch thread count back."""
    stop, threads = Stop(), torch.get_num_threads()
    try:
        return _train(args, stop)
    finally:
        stop.restore()
        torch.set_num_threads(threads)
        if dist.is_initialized():  # also after an error, so torchrun's ranks exit
            dist.destroy_process_group()


def train_device(name: str) -> torch.device:
    """"cpu", "cuda" (a GPU, or an error) or "auto" (a GPU where torch sees one); under torchrun
    each rank takes the GPU of its LOCAL_RANK."""
    if name not in DEVICES:
        raise UsageError(f"unknown device '{name}' (choose {', '.join(DEVICES)})")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device (a CPU build of torch, or no GPU)")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))


def _train(args: TrainArgs, stop: Stop) -> dict:
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    device = train_device(args.device)
    bf16 = device.type == "cuda" if args.bf16 is None else args.bf16
    if ddp:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)

    # --- data: the last valid_bytes are held out, never trained on
    if args.ref_batch is not None:
        if args.ref_batch < 1:
            raise UsageError("--ref-batch must be >= 1")
        lr, warmup = scaled_for_batch(args.lr, args.warmup, args.batch * world, args.ref_batch)
        args = replace(args, lr=lr, warmup=warmup, ref_batch=None)
    if args.qat_steps and args.steps is None:
        raise UsageError("--qat-steps needs --steps (QAT is the last N of them)")
    if args.qat_steps < 0:
        raise UsageError("--qat-steps must be >= 0")
    if args.cooldown and args.steps is None:
        raise UsageError("--cooldown needs --steps (the rate decays over the last N of them)")
    if args.cooldown < 0:
        raise UsageError("--cooldown must be >= 0")
    if args.config not in PRESETS and args.init is None:
        raise UsageError(f"unknown config '{args.config}' (--config: choose {', '.join(PRESETS)})")
    corpus = Corpus(list(args.corpus))
    if args.valid_bytes is None:  # a small corpus keeps most of itself for training
        args = replace(args, valid_bytes=max(args.bptt + 1, min(DEFAULT_VALID_BYTES, len(corpus) // 20)))
    if args.valid_bytes < args.bptt + 1:
        raise UsageError(f"--valid-bytes must be at least one segment ({args.bptt + 1} bytes)")
    train_hi = len(corpus) - args.valid_bytes
    if train_hi < (args.bptt + 21) * args.batch * world:
        raise UsageError(f"corpus too short: {len(corpus):,} bytes less --valid-bytes {args.valid_bytes:,} leave "
                         f"{max(train_hi, 0):,} for training, and --batch {args.batch} streams of one --bptt "
                         f"segment need {(args.bptt + 21) * args.batch * world:,}")
    streams = ByteStreams(corpus, 0, train_hi, args.batch, first_stream=rank * args.batch,
                          total_streams=args.batch * world, device=device, resident=device.type == "cuda")
    valid_hi = len(corpus) if args.eval_bytes is None else min(len(corpus), train_hi + args.eval_bytes)

    # --- model and optimizer
    overrides = {} if args.dropout is None else {"dropout": args.dropout, "dropout_in": args.dropout}
    if args.mem_len is not None:
        overrides["mem_len"] = args.mem_len
    torch.manual_seed(args.seed)
    seen_before = 0  # bytes the warm start's weights had already been trained on, in all its runs
    if args.init is not None:  # warm start: the shape and weights of an existing model file
        loaded_init = load_model(args.init)
        seen_before = int(loaded_init.info.get("bytes_seen", 0)) + int(loaded_init.info.get("bytes_seen_before", 0))
        start = loaded_init.model
        cfg = replace(start.cfg, **overrides)
        model = SHARNN(cfg)
        model.load_state_dict(start.state_dict())
        model = model.to(device)
    else:
        cfg = get_config(args.config, **overrides)
        model = SHARNN(cfg).to(device)
    opt = make_optimizer(args.optimizer, model.parameters(), args.lr, args.weight_decay)
    rng = np.random.default_rng(args.seed)
    step, bytes_seen, state = 0, 0, model.init_state(args.batch, device)

    if args.resume:
        if not args.checkpoint:
            raise UsageError("--resume needs a checkpoint: drop --no-checkpoint")
        if not pieces.exists(out):
            raise UsageError(f"--resume: no checkpoint in {out} ({pieces.MANIFEST})")
        ck = pieces.load(out, device)
        if ck["config"] != cfg.to_dict() or ck["batch"] != args.batch or ck["world"] != world \
                or ck["corpus"] != corpus_identity(args.corpus, corpus) or ck["valid_bytes"] != args.valid_bytes:
            raise UsageError(f"--resume: the checkpoint in {out} was made with a different config, corpus, "
                             f"batch or world size")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        rng.bit_generator.state = ck["numpy_rng"]
        torch.set_rng_state(ck["torch_rng"])
        if device.type == "cuda" and ck.get("cuda_rng") is not None:  # dropout's draws on the GPU
            torch.cuda.set_rng_state(ck["cuda_rng"], device)
        step, bytes_seen, streams.pos = ck["step"], ck["bytes_seen"], ck["data_pos"]
        h, c, mem = ck["carried"][rank]
        state = State([(a.to(device), b.to(device)) for a, b in zip(h, c)], mem.to(device))
    elif rank == 0 and pieces.exists(out):
        raise UsageError(f"{out} already holds a checkpoint: pass --resume to continue it or choose another --out")

    net = torch.nn.parallel.DistributedDataParallel(model) if ddp else model
    if args.compile:  # segments vary in length (the jitter): one graph for all of them
        net = torch.compile(net, dynamic=True)
    metrics = open(out / "metrics.jsonl", "a") if rank == 0 else None
    stop.install()
    if rank == 0 and args.progress:
        until = " and ".join(x for x in (f"step {args.steps}" if args.steps is not None else "",
                                         f"{args.minutes} minutes" if args.minutes is not None else "") if x)
        print(f"training {cfg.d_model}x{cfg.n_layers}, memory {cfg.mem_len}, on {device}"
              f"{' (bf16 autocast)' if bf16 else ''}, from step {step}, until "
              f"{until or 'Ctrl-C (no --steps or --minutes)'}; {args.valid_bytes:,} bytes held out",
              file=sys.stderr, flush=True)
    t_start = t_ckpt = t_log = t_eval = time.time()
    name = args.name or out.name
    snapshot = Path(args.snapshot) if args.snapshot else None
    if rank == 0 and snapshot is not None:
        snapshot.mkdir(parents=True, exist_ok=True)
    log_bits, log_bytes = 0.0, 0
    record: dict = {}

    def export_info() -> dict:
        return {"bytes_seen": bytes_seen, "steps": step, **({"bytes_seen_before": seen_before} if seen_before else {}),
                "config_name": args.config, "batch": args.batch * world, "bptt": args.bptt,
                "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                "train_seconds": round(time.time() - t_start, 1)}

    def checkpoint(snap: bool = True) -> None:
        """The checkpoint, and with `snap` the --snapshot (the end writes its own, from the final export)."""
        if args.checkpoint:
            carried = [[h for h, _ in state.hidden], [c for _, c in state.hidden], state.mem]
            carried = [[t.cpu() for t in carried[0]], [t.cpu() for t in carried[1]], carried[2].cpu()]
            gathered = [None] * world
            if ddp:
                dist.all_gather_object(gathered, carried)
            else:
                gathered = [carried]
            if rank == 0:
                pieces.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "config": cfg.to_dict(),
                             "batch": args.batch, "world": world, "corpus": corpus_identity(args.corpus, corpus),
                             "valid_bytes": args.valid_bytes, "step": step, "bytes_seen": bytes_seen,
                             "data_pos": streams.pos, "numpy_rng": rng.bit_generator.state,
                             "torch_rng": torch.get_rng_state(),
                             "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                             "carried": gathered, "args": asdict(args)}, out)
        if rank == 0 and snap and snapshot is not None:  # what a run killed from outside still leaves: its last weights
            export(model, snapshot / f"{name}.safetensors", name, export_info(), "float32")
            metrics.flush()
            shutil.copyfile(out / "metrics.jsonl", snapshot / "metrics.jsonl")

    def agreed(flag: bool) -> bool:
        """True on every rank if true on any: ranks must take collective paths together."""
        if ddp:
            t = torch.tensor([int(flag)], device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag = bool(t.item())
        return flag

    def should_stop() -> bool:
        # every rank must leave the loop at the same step
        return agreed((args.steps is not None and step >= args.steps) or stop.flag or
                      (args.minutes is not None and time.time() - t_start >= 60 * args.minutes))

    def qat_now() -> bool:
        return args.qat_steps > 0 and step >= args.steps - args.qat_steps

    if rank == 0 and args.init is not None and not args.resume:  # a fine-tune's "before"
        record = {"step": 0, "bytes_seen": 0, "time": 0.0,
                  "valid_bpc": round(evaluate(model, corpus, train_hi, valid_hi, args.bptt), 4)}
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()
        if args.progress:
            print(f"held-out {record['valid_bpc']:.4f} bits/byte before training (the --init model)",
                  file=sys.stderr, flush=True)
    model.train()
    while not should_stop():
        model.set_qat(qat_now())
        seq_len = seq_len_jitter(rng, args.bptt)
        x, wrapped = streams.next_batch(seq_len)
        if wrapped:
            state = model.init_state(args.batch, device)
        for g in opt.param_groups:
            g["lr"] = lr_at(args, step)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits, new_state = net(x[:, :-1], state)
        loss = bits_per_byte(logits, x[:, 1:])
        opt.zero_grad(set_to_none=True)
        (loss * math.log(2)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        state = new_state.detach()
        step += 1
        bytes_seen += seq_len * args.batch * world
        log_bits += loss.detach().double() * (seq_len * args.batch)  # a tensor: no wait for the GPU each step
        log_bytes += seq_len * args.batch

        now = time.time()
        eval_now = step % args.eval_every == 0 or (args.eval_minutes is not None
                                                    and agreed(now - t_eval >= 60 * args.eval_minutes))
        if rank == 0 and (step % args.log_every == 0 or eval_now):
            record = {"step": step, "bytes_seen": bytes_seen, "train_bpc": round(float(log_bits) / log_bytes, 4),
                      **({"qat": True} if model.qat else {}),
                      "bytes_per_s": round(log_bytes * world / (now - t_log), 1), "lr": lr_at(args, step - 1),
                      "time": round(now - t_start, 1)}
            if eval_now:
                record["valid_bpc"] = round(evaluate(model, corpus, train_hi, valid_hi, args.bptt), 4)
                t_eval = time.time()
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            if args.progress:
                extra = f" valid {record['valid_bpc']:.3f}" if "valid_bpc" in record else ""
                print(f"step {step} | {bytes_seen / 1e6:.2f} MB | train {record['train_bpc']:.3f} bits/byte{extra} | "
                      f"{record['bytes_per_s'] / 1e3:.1f} KB/s", file=sys.stderr, flush=True)
            log_bits, log_bytes, t_log = 0.0, 0, time.time()
        if agreed(now - t_ckpt >= 60 * args.checkpoint_minutes):  # wall clocks differ between ranks
            checkpoint()
            t_ckpt = time.time()

    checkpoint(snap=False)
    if rank == 0:
        final = {"step": step, "bytes_seen": bytes_seen, **({"qat": True} if model.qat else {}),
                 "valid_bpc": round(evaluate(model, corpus, train_hi, valid_hi, args.bptt), 4),
                 "time": round(time.time() - t_start, 1), "final": True}
        metrics.write(json.dumps(final) + "\n")
        metrics.close()
        info = {**export_info(), "valid_bpc": final["valid_bpc"], "qat_steps": args.qat_steps if model.qat else 0,
                "cooldown_steps": args.cooldown if args.steps is not None and step >= args.steps else 0}
        kept = _keep_earlier_export(out / f"{name}.safetensors")
        digest = export(model, out / f"{name}.safetensors", name, info, "int8" if args.int8 else "float32")
        if snapshot is not None:
            shutil.copyfile(out / f"{name}.safetensors", snapshot / f"{name}.safetensors")
            shutil.copyfile(out / "metrics.jsonl", snapshot / "metrics.jsonl")
        if kept is not None and kept.name.endswith(f"-{digest[:12]}.safetensors"):
            kept.unlink()  # the same weights again: nothing earlier to keep
            kept = None
        final["model_id"] = digest
        print(f"held-out {final['valid_bpc']:.4f} bits/byte after {step} steps "
              f"({bytes_seen / 1e6:.1f} MB seen)", file=sys.stderr)
        print(f"exported {out / f'{name}.safetensors'} sha256 {digest}" +
              (f"; the earlier export, which archives may need, is kept as {kept}" if kept else ""), file=sys.stderr)
        print(digest)
        record = final
    if ddp:  # ranks tear gloo down together: one leaving while rank 0 exports has aborted at exit
        dist.barrier()
    return record
