"""The built-in reference policy: a VLA-shaped transformer.

Frames from `num_cams` cameras over `n_obs_steps` steps are cut into patches, joined by a state
token, and run through BackboneBlocks; an action expert of ExpertBlocks turns `chunk_size`
action queries into an action chunk by attending to the backbone's tokens. The two block classes
are the FSDP wrap units (policy.block_classes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from registry import view


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.kv = nn.Linear(hidden, 2 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, n, h = x.shape
        q = self.q(x).view(b, n, self.heads, -1).transpose(1, 2)
        k, v = self.kv(context).view(b, context.shape[1], 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, n, h))


class MLP(nn.Module):
    def __init__(self, hidden: int, ratio: float):
        super().__init__()
        self.up = nn.Linear(hidden, int(hidden * ratio))
        self.down = nn.Linear(int(hidden * ratio), hidden)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class BackboneBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, ratio: float):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn, self.mlp = Attention(hidden, heads), MLP(hidden, ratio)

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attn(y, y)
        return x + self.mlp(self.norm2(x))


class ExpertBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, ratio: float):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(hidden), nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.self_attn, self.cross_attn = Attention(hidden, heads), Attention(hidden, heads)
        self.mlp = MLP(hidden, ratio)

    def forward(self, x, context):
        y = self.norm1(x)
        x = x + self.self_attn(y, y)
        x = x + self.cross_attn(self.norm2(x), context)
        return x + self.mlp(self.norm3(x))


class LearnedTokens(nn.Module):
    """Learned positions or queries. A module, not a bare root parameter: accelerate's FSDP2
    loading expects every parameter to live in a submodule."""

    def __init__(self, count: int, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, count, hidden))
        nn.init.normal_(self.weight, std=0.02)


class ReferencePolicy(nn.Module):
    def __init__(
        self,
        *,
        hidden: int,
        depth: int,
        expert_depth: int,
        heads: int,
        patch: int,
        image_size: int,
        state_dim: int,
        action_dim: int,
        chunk_size: int,
        frames: int,
        mlp_ratio: float = 4.0,
        gradient_checkpointing: bool = False,
        lazy: bool = False,
    ):
        super().__init__()
        self.frames, self.chunk_size, self.gradient_checkpointing = frames, chunk_size, gradient_checkpointing
        tokens = frames * (image_size // patch) ** 2
        self.patch = nn.Conv2d(3, hidden, kernel_size=patch, stride=patch)
        self.position = LearnedTokens(tokens + 1, hidden)
        # Lazily shaped modules learn their input size at the first forward (docs/failure-modes.md §seed-000).
        self.state = nn.LazyLinear(hidden) if lazy else nn.Linear(state_dim, hidden)
        self.blocks = nn.ModuleList(BackboneBlock(hidden, heads, mlp_ratio) for _ in range(depth))
        self.queries = LearnedTokens(chunk_size, hidden)
        self.expert = nn.ModuleList(ExpertBlock(hidden, heads, mlp_ratio) for _ in range(expert_depth))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.LazyLinear(action_dim) if lazy else nn.Linear(hidden, action_dim)

    def forward(self, images: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """images [B, frames, 3, H, W], state [B, state_dim] -> actions [B, chunk, action_dim]."""
        b = images.shape[0]
        patches = self.patch(images.flatten(0, 1)).flatten(2).transpose(1, 2)  # [B*frames, p, hidden]
        x = (
            torch.cat([self.state(state)[:, None], patches.reshape(b, -1, patches.shape[-1])], dim=1)
            + self.position.weight
        )
        for block in self.blocks:
            x = self._run(block, x)
        q = self.queries.weight.expand(b, -1, -1)
        for block in self.expert:
            q = self._run(block, q, x)
        return self.head(self.norm(q))

    def _run(self, block, *args):
        if self.gradient_checkpointing and self.training:
            return checkpoint(block, *args, use_reentrant=False)
        return block(*args)


def build(doc) -> ReferencePolicy:
    """The policy a recipe describes; its shape defaults live in the policy schema's `arch`."""
    recipe = view.of(doc)
    policy, arch = recipe.policy, recipe.policy.arch
    return ReferencePolicy(
        hidden=arch.hidden,
        depth=arch.depth,
        expert_depth=arch.expert_depth,
        heads=arch.heads,
        patch=arch.patch,
        image_size=arch.image_size,
        state_dim=arch.state_dim,
        action_dim=arch.action_dim,
        chunk_size=policy.chunk_size,
        frames=recipe.dataset.num_cams * policy.n_obs_steps,
        mlp_ratio=float(arch.mlp_ratio),
        gradient_checkpointing=policy.gradient_checkpointing,
        lazy=arch.lazy,
    )
