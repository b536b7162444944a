"""Synthetic, deterministic episodes whose actions are a learnable function of the observations.

Each sample index i has a latent z_i (a fixed function of i); images, state and the action chunk
are fixed functions of z_i, so the policy can learn actions from observations and the loss falls.
Batches are computed on the training device from their indices: no data loading can bottleneck
a throughput measurement, and any rank can rebuild any sample, which makes resume exact.
"""

from __future__ import annotations

import torch

from registry import view

LATENT = 16


class Synthetic:
    def __init__(self, doc, device: torch.device):
        recipe = view.of(doc)
        policy, arch, synthetic = recipe.policy, recipe.policy.arch, recipe.dataset.synthetic
        self.samples = synthetic.samples
        self.seed = synthetic.seed
        self.frames = recipe.dataset.num_cams * policy.n_obs_steps
        self.size = arch.image_size
        self.chunk = policy.chunk_size
        self.action_dim = arch.action_dim
        g = torch.Generator().manual_seed(self.seed)
        pixels = self.frames * 3 * self.size * self.size
        self.freqs = (torch.rand(LATENT, generator=g) * 0.1 + 0.01).to(device)
        self.phase = (torch.rand(LATENT, generator=g) * 6.28).to(device)
        self.to_image = (torch.randn(LATENT, pixels, generator=g) / LATENT**0.5).to(device)
        self.to_state = (torch.randn(LATENT, arch.state_dim, generator=g) / LATENT**0.5).to(device)
        self.to_action = (torch.randn(LATENT, self.chunk * self.action_dim, generator=g) / LATENT**0.5).to(device)
        self.device = device

    def batch(self, indices: torch.Tensor, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        i = indices.to(self.device, torch.float32)[:, None]
        z = torch.sin(i * self.freqs + self.phase)  # [B, LATENT]
        images = torch.tanh(z @ self.to_image).view(-1, self.frames, 3, self.size, self.size)
        return {
            "images": images.to(dtype),
            "state": (z @ self.to_state).to(dtype),
            "actions": torch.tanh(z @ self.to_action).view(-1, self.chunk, self.action_dim),
        }


def indices(
    step: int, micro_step: int, accumulation: int, rank: int, world: int, micro: int, samples: int, seed: int
) -> torch.Tensor:
    """The sample indices of one rank's micro batch: epoch-wise permutations, rank-disjoint
    slices. A pure function of the position, so a resumed run sees exactly the same data."""
    per_step = world * micro
    start = ((step * accumulation) + micro_step) * per_step + rank * micro
    out = []
    for position in range(start, start + micro):
        epoch, offset = divmod(position, samples)
        out.append(_permutation(seed, epoch, samples)[offset])
    return torch.stack(out)


_cache: dict[tuple[int, int, int], torch.Tensor] = {}


def _permutation(seed: int, epoch: int, samples: int) -> torch.Tensor:
    key = (seed, epoch, samples)
    if key not in _cache:
        _cache.clear()
        _cache[key] = torch.randperm(samples, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    return _cache[key]
