"""`shazip train`: the command line of the trainer (trainer.py), its options one for one with
`TrainArgs`. Registered lazily by shazip.cli; `python -m shazip.train` (and torchrun) run it too."""

from __future__ import annotations

import sys

import click

from ..model.config import PRESETS
from ..errors import ShazipError
from ..options import DEVICES
from .trainer import TrainArgs, train


@click.command("train")
@click.argument("corpus", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", required=True,
              help="Run folder: the checkpoint (checkpoint.json and its pieces), metrics.jsonl, NAME.safetensors.")
@click.option("--config", default="small", show_default=True,
              help=f"Model shape preset: {', '.join(PRESETS)} (ignored with --init).")
@click.option("--name", default=None, help="Exported model name (default: the --out folder name).")
@click.option("--batch", default=32, show_default=True, help="Parallel streams per process.")
@click.option("--bptt", default=128, show_default=True, help="Mean segment length (bytes).")
@click.option("--lr", default=2e-3, show_default=True, help="Learning rate after the warm-up.")
@click.option("--warmup", default=200, show_default=True, help="Linear warm-up steps.")
@click.option("--ref-batch", type=int, default=None,
              help="--lr and --warmup are tuned for this many streams in all: scale them to --batch "
                   "(the rate by the square root of the ratio, the warm-up steps by its inverse).")
@click.option("--clip", default=0.25, show_default=True, help="Gradient norm clip.")
@click.option("--optimizer", type=click.Choice(["lamb", "adamw"]), default="lamb", show_default=True)
@click.option("--weight-decay", default=0.0, show_default=True, help="Decoupled weight decay.")
@click.option("--dropout", type=float, default=None, help="Override the preset's dropout.")
@click.option("--mem-len", type=int, default=None, help="Override the attention memory length (states).")
@click.option("--init", default=None,
              help="Warm start from a model file or bundled name (its shape; --config is then ignored).")
@click.option("--valid-bytes", type=int, default=None,
              help="Held out from the corpus end for validation [default: 5 % of the corpus, at most 2 MB].")
@click.option("--steps", type=int, default=None,
              help="Stop after this many steps in total. With neither --steps nor --minutes, training runs "
                   "until Ctrl-C, which saves and exports.")
@click.option("--qat-steps", default=0, show_default=True,
              help="Quantization-aware training for the last N of --steps (int8-ready export).")
@click.option("--cooldown", default=0, show_default=True,
              help="Decay the learning rate linearly over the last N of --steps.")
@click.option("--int8", is_flag=True, help="Export the matrices as int8 rows + scales (the shipped form, ~4x smaller).")
@click.option("--minutes", type=float, default=None, help="Stop after this much wall time (this run).")
@click.option("--checkpoint-minutes", default=5.0, show_default=True,
              help="Save the checkpoint (and the --snapshot) this often.")
@click.option("--checkpoint/--no-checkpoint", default=True, show_default=True,
              help="--no-checkpoint: none is written (a run on a lent machine, whose checkpoint would not "
                   "come back; its --snapshot is what the next run continues from).")
@click.option("--eval-every", default=500, show_default=True, help="Validation every N steps.")
@click.option("--eval-minutes", type=float, default=None,
              help="Also validate when this much wall time has passed since the last validation.")
@click.option("--eval-bytes", type=int, default=None,
              help="Validate on the first N held-out bytes only (a fixed slice); the final figure too "
                   "[default: all of --valid-bytes].")
@click.option("--snapshot", default=None, type=click.Path(file_okay=False),
              help="Also write the float export NAME.safetensors and metrics.jsonl here at every checkpoint "
                   "(a run killed from outside leaves its last weights there).")
@click.option("--compile", is_flag=True, help="torch.compile the model for training (dynamic segment lengths).")
@click.option("--log-every", default=20, show_default=True, help="Log training bits/byte every N steps.")
@click.option("--threads", type=int, default=None, help="torch CPU threads.")
@click.option("--device", type=click.Choice(DEVICES), default="auto", show_default=True,
              help="cpu, cuda (a GPU), or auto (cuda where torch sees one).")
@click.option("--bf16/--fp32", default=None,
              help="bf16 autocast, fp32 master weights [default: on a GPU only; slower than fp32 on a CPU "
                   "without AMX]. The int8 export is exact either way.")
@click.option("--seed", default=1234, show_default=True, help="Seeds the weights and the segment jitter.")
@click.option("--resume", is_flag=True, help="Continue the checkpoint in --out exactly.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
def train_command(quiet: bool, **kw) -> None:
    """Train a SHA-RNN on your own text. CORPUS files are plain or .zst; the run ends in a model
    file (NAME.safetensors in --out) that --model takes."""
    kw["corpus"] = tuple(kw["corpus"])
    try:
        train(TrainArgs(progress=not quiet, **kw))
    except ShazipError as e:
        click.echo(f"shazip: {e}", err=True)
        sys.exit(e.exit_code)
    except ValueError as e:
        click.echo(f"shazip: {e}", err=True)
        sys.exit(2)
