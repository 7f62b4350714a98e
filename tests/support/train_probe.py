"""Test helper run by the target venv's Python for the training tests.

    python train_probe.py synthetic --out DIR --samples N --pattern index|random   # hidden-state files
    python train_probe.py batch --data DIR --work DIR --indices 0 1 --total-seq-len 64  # one packed batch
    python train_probe.py resolve FLAG...   # speculators' own TrainConfig resolving train_cuda's flags
    python train_probe.py muon              # Float32Muon against torch's Muon with its Newton-Schulz in float32
    python train_probe.py final-norm DIR    # the final norm's gains of a target or drafter directory

`synthetic` writes files in extract.py's format with the hidden size and layers of SmolLM2 (576; 2, 15, 27,
30). With --pattern index, hidden_states[t, slot, :] == 4 * t + slot and token t is 1000 + t, so a batch
shows where each value came from (exact in bf16 below 256); with --pattern random they are seeded noise.
Each command prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "workloads"))

from drafter_data import PackedBatches, stage
from hidden_states_file import file_name, write

LAYERS = [2, 15, 27, 30]
HIDDEN = 576


def synthetic(out: Path, samples: int, pattern: str, seed: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    lengths = []
    for index in range(samples):
        length = int(torch.randint(12, 48, (1,), generator=generator)) if pattern == "random" else 6 + index
        if pattern == "index":
            token_ids = 1000 + torch.arange(length)
            positions = torch.arange(length, dtype=torch.float32)[:, None, None]
            hidden = (4 * positions + torch.arange(len(LAYERS))[None, :, None]).expand(length, len(LAYERS), HIDDEN)
        else:
            token_ids = torch.randint(10, 2000, (length,), generator=generator)
            hidden = torch.randn(length, len(LAYERS), HIDDEN, generator=generator)
        loss_mask = torch.arange(length) % 3 != 0  # a pattern that tells positions apart
        tensors = {"token_ids": token_ids, "hidden_states": hidden.to(torch.bfloat16), "loss_mask": loss_mask}
        write(out / file_name(index), tensors, LAYERS, f"s{index}")
        lengths.append(length)
    return {"lengths": lengths}


def batch(data: Path, work: Path, indices: list[int], total_seq_len: int) -> dict[str, Any]:
    staged = stage(data, work / "staged")
    batches = PackedBatches(staged, split="train", train_ratio=1.0, total_seq_len=total_seq_len, seed=0)
    tensors = batches.batch(indices)
    aux = tensors["hidden_states"][0]  # [seq, 3 * hidden]: the aux layers side by side
    return {
        "input_ids": tensors["input_ids"][0].tolist(),
        "document_ids": tensors["document_ids"][0].tolist(),
        "position_ids": tensors["position_ids"][0].tolist(),
        "loss_mask": tensors["loss_mask"][0].int().tolist(),
        "aux": aux[:, :: staged.hidden_size].tolist(),  # the first value of each aux layer, per position
        "aux_constant": bool((aux.view(aux.shape[0], -1, staged.hidden_size).diff(dim=-1) == 0).all()),
        "last": tensors["verifier_last_hidden_states"][0, :, 0].tolist(),
        "layer_ids": staged.layer_ids,
    }


def resolve(flags: list[str]) -> dict[str, Any]:
    from speculators.train.config import TrainConfig

    flat = TrainConfig.resolve(flags).flatten()
    return {key: value for key, value in flat.items() if isinstance(value, (str, int, float, bool, list, type(None)))}


def muon() -> dict[str, Any]:
    """Float32Muon against torch's Muon with its Newton-Schulz swapped for the float32 one: the largest
    difference of parameters and momentum after three steps on tall, wide and square matrices, with and
    without Nesterov (each also loads the other's state); and the difference to torch's Muon as is."""
    from unittest import mock

    from muon_fp32 import Float32Muon, newton_schulz

    def params() -> list[torch.nn.Parameter]:
        generator = torch.Generator().manual_seed(0)
        shapes = [(96, 48), (48, 96), (64, 64)]
        return [torch.nn.Parameter(torch.randn(shape, generator=generator)) for shape in shapes]

    def run(make: Any, nesterov: bool) -> torch.optim.Optimizer:
        weights = params()
        optimizer = make(weights, lr=0.02, nesterov=nesterov, adjust_lr_fn="match_rms_adamw")
        generator = torch.Generator().manual_seed(1)
        for _ in range(3):
            for weight in weights:
                weight.grad = torch.randn(weight.shape, generator=generator)
            optimizer.step()
        return optimizer

    def tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        weights = optimizer.param_groups[0]["params"]
        return [*weights, *(optimizer.state[weight]["momentum_buffer"] for weight in weights)]

    def difference(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> float:
        return max(float((x - y).detach().abs().max()) for x, y in zip(tensors(a), tensors(b), strict=True))

    differences = []
    for nesterov in (True, False):
        ours = run(Float32Muon, nesterov)
        with mock.patch("torch.optim._muon._zeropower_via_newtonschulz", newton_schulz):
            theirs = run(torch.optim.Muon, nesterov)
        differences.append(difference(ours, theirs))
        ours.load_state_dict(theirs.state_dict())
        theirs.load_state_dict(ours.state_dict())
    as_is = difference(run(Float32Muon, True), run(torch.optim.Muon, True))
    return {"max_difference": max(differences), "bfloat16_difference": as_is}


def final_norm(directory: Path) -> list[float]:
    """The final norm's gains in a model directory (the target's `model.norm`, a drafter's `norm`), as bf16 holds
    them (drafters are saved in bf16)."""
    import torch
    from safetensors import safe_open

    for path in sorted(directory.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            for name in ("model.norm.weight", "norm.weight"):
                if name in handle.keys():  # noqa: SIM118 (safe_open has no __contains__)
                    return handle.get_tensor(name).to(torch.bfloat16).float().tolist()
    raise SystemExit(f"no final norm in {directory}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("synthetic")
    make.add_argument("--out", type=Path, required=True)
    make.add_argument("--samples", type=int, required=True)
    make.add_argument("--pattern", choices=["index", "random"], required=True)
    make.add_argument("--seed", type=int, default=0)
    one = commands.add_parser("batch")
    one.add_argument("--data", type=Path, required=True)
    one.add_argument("--work", type=Path, required=True)
    one.add_argument("--indices", type=int, nargs="+", required=True)
    one.add_argument("--total-seq-len", type=int, required=True)
    commands.add_parser("resolve")  # every further argument is a flag for speculators
    commands.add_parser("muon")
    commands.add_parser("final-norm").add_argument("directory", type=Path)
    args, flags = parser.parse_known_args()
    if flags and args.command != "resolve":
        parser.error(f"unrecognized arguments: {flags}")
    if args.command == "synthetic":
        result = synthetic(args.out, args.samples, args.pattern, args.seed)
    elif args.command == "batch":
        result = batch(args.data, args.work, args.indices, args.total_seq_len)
    elif args.command == "muon":
        result = muon()
    elif args.command == "final-norm":
        result = final_norm(args.directory)
    else:
        result = resolve(flags)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
