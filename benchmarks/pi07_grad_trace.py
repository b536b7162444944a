"""Where a pi07 rehearsal's gradient stops being finite: one forward and backward of OpenTau's own
policy, built from a rehearsal's run folder, with the gradient leaving each backbone layer's two
post-norms (Gemma 3's sandwich norms) printed from the top layer down (docs/rehearsal.md).

    HF_HOME=REHEARSAL/synthetic/hf .venv-opentau/bin/python benchmarks/pi07_grad_trace.py REHEARSAL/run

Runs in OpenTau's environment (tests/upstream/opentau_env.sh), never imports `registry`. For each
norm: the largest finite gradient on its output over the positions of the first sample, how many
positions are not finite, and how many positions reach it with an input that is exactly zero.
"""

import os
import sys

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled")
import torch
from opentau.configs import parser
from opentau.configs.train import TrainPipelineConfig
from opentau.datasets.factory import make_dataset_mixture
from opentau.policies.factory import make_policy

run = sys.argv[1]
os.chdir(run)
sys.argv = [sys.argv[0], "--config_path=opentau.json"]
rows = {}


@parser.wrap()
def main(cfg: TrainPipelineConfig):
    cfg.validate()
    ds = make_dataset_mixture(cfg)
    policy = make_policy(cfg=cfg.policy, ds_meta=ds.meta)
    policy.to(torch.bfloat16)
    layers = policy.model.gemma3_with_expert.interleaved_layers
    for i, L in enumerate(layers):
        for nm in ("post_feedforward_layernorm", "post_attention_layernorm"):
            norm = getattr(L.backbone_layer, nm)

            def fwd(m, args, out, i=i, nm=nm):
                x = args[0].detach().float()
                rms = x.pow(2).mean(-1).sqrt()[0]

                def g_hook(g, i=i, nm=nm, rms=rms):
                    gm = g.detach().float().abs().amax(-1)[0]
                    rows[(i, nm)] = (rms, gm)

                out.register_hook(g_hook)

            norm.register_forward_hook(fwd)
    policy.train()
    batch = next(iter(ds.get_dataloader()))
    losses = policy.forward(batch)
    (losses["MSE"] + losses["CE"]).backward()
    for (i, nm), (rms, gm) in sorted(rows.items(), reverse=True):
        top = int(torch.nan_to_num(gm, nan=float("inf")).argmax())
        fin = torch.isfinite(gm)
        print(
            f"layer {i:2d} {nm[:9]} grad_out max {float(gm[fin].max()) if fin.any() else float('nan'):.3g} nonfinite {int((~fin).sum())} | at argmax pos {top}: rms(x)={float(rms[top]):.3g} grad={float(gm[top]):.3g} | min rms {float(rms.min()):.3g} zero rms {int((rms == 0).sum())}/{rms.numel()}"
        )


main()
