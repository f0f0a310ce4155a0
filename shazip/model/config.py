"""The model's shape: its config, the named presets, and the tensors a model of a given shape has.

Kept apart from sharnn.py (torch) so that reading and checking a model file, and running it on
the native core, never imports torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

VOCAB = 256  # every byte value is a symbol, seen in training or not


@dataclass(frozen=True)
class Config:
    """Model shape and regularization. `attn_layer` is a block index (negative counts from the end)."""

    d_model: int = 256
    n_layers: int = 2
    d_boom: int = 1024
    mem_len: int = 512
    attn_layer: int = -2
    dropout: float = 0.0  # on LSTM/attention/Boom outputs and before the softmax
    dropout_in: float = 0.0  # on the embedding
    collapsed_vs: bool = False  # True once the over-parameterized value gate is a constant

    def __post_init__(self) -> None:
        if self.d_model <= 0 or self.n_layers <= 0 or self.mem_len <= 0:
            raise ValueError("d_model, n_layers and mem_len must be positive")
        if self.d_boom % self.d_model:
            raise ValueError("d_boom must be a multiple of d_model (Boom sums d_boom/d_model chunks)")
        if not -self.n_layers <= self.attn_layer < self.n_layers:
            raise ValueError(f"attn_layer {self.attn_layer} out of range for {self.n_layers} layers")

    @property
    def attn_index(self) -> int:
        return self.attn_layer % self.n_layers

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown config fields: {sorted(unknown)}")
        return cls(**d)


# `small` trades depth for speed on a 2-core CPU; dropout is off for presets trained for
# less than one epoch (no text is seen twice, so there is nothing to overfit). `large` (3.8M
# parameters) is the largest shape whose -9 on one CPU core, in lanes of 256 KB, stays faster than
# paq8px -8 on the same file (models/README.md, "Choosing large"); it is trained on lent GPUs
# (models/gpu/), several passes over each carried piece of text, hence its dropout. `paper` is the
# enwik8 model of the paper (4 x 1024, Boom 4096, memory 5000, dropout 0.1).
PRESETS: dict[str, Config] = {
    "tiny": Config(d_model=32, n_layers=2, d_boom=128, mem_len=24),
    "mini": Config(d_model=128, n_layers=2, d_boom=512, mem_len=256),
    "small": Config(d_model=256, n_layers=2, d_boom=1024, mem_len=512),
    "large": Config(d_model=384, n_layers=2, d_boom=1536, mem_len=512, dropout=0.1, dropout_in=0.1),
    "paper": Config(d_model=1024, n_layers=4, d_boom=4096, mem_len=5000, dropout=0.1, dropout_in=0.1),
}


def get_config(name: str, **overrides) -> Config:
    if name not in PRESETS:
        raise ValueError(f"unknown config '{name}' (choose {', '.join(PRESETS)})")
    return replace(PRESETS[name], **overrides)


def tensor_shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    """The state dict of `sharnn.SHARNN(cfg)`: every tensor's name and shape (tests check the two
    agree), so a model file is checked against its config without building the model."""
    d, v = cfg.d_model, VOCAB
    shapes: dict[str, tuple[int, ...]] = {"embed.weight": (v, d), "out_bias": (v,)}
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        norms = ["ln_start", "ln_ff", "ln_xff"] + (["ln_mem", "ln_mid"] if i == cfg.attn_index else [])
        for n in norms:
            shapes |= {p + n + ".weight": (d,), p + n + ".bias": (d,)}
        shapes |= {p + "rnn.weight_ih_l0": (4 * d, d), p + "rnn.weight_hh_l0": (4 * d, d),
                   p + "rnn.bias_ih_l0": (4 * d,), p + "rnn.bias_hh_l0": (4 * d,),
                   p + "boom.up.weight": (cfg.d_boom, d), p + "boom.up.bias": (cfg.d_boom,)}
        if i == cfg.attn_index:
            a = p + "attn."
            shapes |= {a + "q.weight": (d, d), a + "q.bias": (d,), a + "q_ln.weight": (d,), a + "q_ln.bias": (d,),
                       a + "qs": (d,), a + "ks": (d,), a + "vs": (d,)}
            if not cfg.collapsed_vs:
                shapes |= {a + "vq.weight": (2 * d, d), a + "vq.bias": (2 * d,)}
    return shapes
