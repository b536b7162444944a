"""A FAST-style action tokenizer for rehearsals, fitted on the rehearsal's own synthetic actions.

Copied into the tokenizer folder that a rehearsal writes, and loaded from there by the trainer with
`AutoProcessor.from_pretrained(path, trust_remote_code=True)` (processor_config.json's auto_map
names this module). It runs in the trainer's environment: numpy and tokenizers only, never
`registry`. What it does is FAST's recipe (docs/rehearsal.md): a DCT of each normalised action
chunk along time, the coefficients scaled and rounded, then a byte-pair encoding over the
coefficient symbols, so the sequence the policy predicts is short where the motion is smooth.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, models, trainers

CONFIG = "fast_config.json"
BPE = "fast_bpe.json"
FIRST = 0x4E00  # coefficient symbols as one printable block of code points, one per value


def _dct_matrix(n: int) -> np.ndarray:
    """The orthonormal DCT-II as an n x n matrix (its transpose is the inverse): what
    scipy.fft.dct(..., norm="ortho") computes, without scipy in the trainer's environment."""
    k, t = np.arange(n)[:, None], np.arange(n)[None, :]
    m = np.cos(np.pi * (2 * t + 1) * k / (2 * n)) * np.sqrt(2.0 / n)
    m[0] /= np.sqrt(2.0)
    return m


def dct(x: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(np.tensordot(_dct_matrix(x.shape[axis]), np.moveaxis(x, axis, 0), axes=1), 0, axis)


def idct(x: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(np.tensordot(_dct_matrix(x.shape[axis]).T, np.moveaxis(x, axis, 0), axes=1), 0, axis)


class RehearsalFastProcessor:
    """`processor(actions)` -> one list of token ids per chunk; `decode` goes back."""

    def __init__(self, bpe: Tokenizer, scale: float, lowest: int, symbols: int, chunk: int, dims: int):
        self.bpe, self.scale, self.lowest, self.symbols = bpe, scale, lowest, symbols
        self.chunk, self.dims = chunk, dims

    @property
    def vocab_size(self) -> int:
        return self.bpe.get_vocab_size()

    # --- coefficient symbols ---------------------------------------------------------------
    def _text(self, chunk: np.ndarray) -> str:
        coeffs = dct(np.asarray(chunk, dtype=np.float64), axis=0)  # (time, dims)
        values = np.clip(np.around(coeffs * self.scale).astype(np.int64) - self.lowest, 0, self.symbols - 1)
        return "".join(chr(FIRST + int(v)) for v in values.T.reshape(-1))  # dimension by dimension

    def __call__(self, actions) -> list[list[int]]:
        batch = np.asarray(actions, dtype=np.float64)
        if batch.ndim == 2:
            batch = batch[None]
        return [self.bpe.encode(self._text(chunk)).ids for chunk in batch]

    def decode(self, tokens, time_horizon: int | None = None, action_dim: int | None = None) -> np.ndarray:
        time_horizon, action_dim = time_horizon or self.chunk, action_dim or self.dims
        chunks = []
        for ids in tokens:
            text = self.bpe.decode(list(ids)).replace(" ", "")
            values = np.array([ord(c) - FIRST for c in text], dtype=np.float64)
            values = np.resize(values, time_horizon * action_dim)  # a short prediction is padded, as FAST does
            coeffs = (values + self.lowest).reshape(action_dim, time_horizon).T / self.scale
            chunks.append(idct(coeffs, axis=0))
        return np.stack(chunks)

    # --- fitting and files -------------------------------------------------------------------
    @classmethod
    def fit(cls, chunks: np.ndarray, vocab_size: int, scale: float = 10.0) -> RehearsalFastProcessor:
        chunks = np.asarray(chunks, dtype=np.float64)  # (n, time, dims), normalised to about [-1, 1]
        coeffs = np.around(dct(chunks, axis=1) * scale).astype(np.int64)
        lowest, highest = int(coeffs.min()), int(coeffs.max())
        symbols = highest - lowest + 1
        alphabet = [chr(FIRST + v) for v in range(symbols)]
        bpe = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=max(vocab_size, symbols), initial_alphabet=alphabet, show_progress=False
        )
        processor = cls(bpe, scale, lowest, symbols, chunks.shape[1], chunks.shape[2])
        bpe.train_from_iterator((processor._text(c) for c in chunks), trainer=trainer)
        return processor

    def save_pretrained(self, folder) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.bpe.save(str(folder / BPE))
        settings = {"scale": self.scale, "lowest": self.lowest, "symbols": self.symbols}
        (folder / CONFIG).write_text(json.dumps({**settings, "chunk": self.chunk, "dims": self.dims}) + "\n")
        auto_map = {"AutoProcessor": f"{Path(__file__).stem}.{type(self).__name__}"}
        # transformers' AutoProcessor takes a class from here only when processor_class is named too
        named = {"processor_class": type(self).__name__, "auto_map": auto_map}
        (folder / "processor_config.json").write_text(json.dumps(named) + "\n")
        (folder / Path(__file__).name).write_text(Path(__file__).read_text())

    @classmethod
    def register_for_auto_class(cls, auto_class: str = "AutoProcessor") -> None:
        """transformers calls it on a class loaded as remote code; nothing to register here."""

    @classmethod
    def from_pretrained(cls, folder, **_ignored) -> RehearsalFastProcessor:
        folder = Path(folder)
        settings = json.loads((folder / CONFIG).read_text())
        return cls(Tokenizer.from_file(str(folder / BPE)), **settings)
