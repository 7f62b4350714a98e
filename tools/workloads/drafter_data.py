"""Hidden-state files -> the data directory speculators' trainer reads, and packed training batches from it.

extract.py writes one safetensors file per sample: `token_ids` [seq] int64, `hidden_states`
[seq, n_layers, hidden] (the auxiliary layers, then the last layer before the final norm) and `loss_mask`
[seq]. speculators' trainer instead reads a `datasets` directory (`input_ids`, `loss_mask`, `seq_len`) beside
`hidden_states/hs_<row>.safetensors`. `stage` builds that directory with links to the original files, so the
CUDA path (speculators' own trainer) and the CPU loop read the very same data through speculators' own
dataset, packing sampler, collate function and `shift_batch`. A sample with only a token file (extract.py
--offline-samples) gets no link: its row is listed in `Staged.online`, and train.py --online fetches its hidden
states into the staged directory while it trains (online_fetch.py).

Needs torch, safetensors, datasets and speculators (the target environment); imported by train.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hidden_states_file import is_token_file, read_header, training_files

STAGE_FORMAT = 2  # bumped when the staged layout or its manifest changes, so an older one is rebuilt


@dataclass(frozen=True)
class Staged:
    """A staged data directory and the facts about its samples that the trainer needs."""

    path: Path
    samples: int
    tokens: int
    loss_tokens: int
    num_layers: int  # captured layers per token: the auxiliary ones plus the last
    hidden_size: int
    layer_ids: list[int] | None  # as extract.py records them in each file's metadata (None: not recorded)
    max_len: int  # the longest sample, in tokens
    online: list[int]  # the rows with only a token file, whose hidden states are fetched while training

    @property
    def aux_layer_ids(self) -> list[int] | None:
        return self.layer_ids[:-1] if self.layer_ids else None


def hidden_state_files(data_dir: Path) -> list[Path]:
    files = training_files(data_dir)
    if not files:
        raise SystemExit(
            f"No hidden-state files (hs_<index>.safetensors) in {data_dir}. Run extract.py first, or point --data "
            "at the directory it wrote."
        )
    return files


def _metadata(path: Path) -> dict[str, str]:
    metadata = read_header(path)[0].get("__metadata__", {})
    return metadata if isinstance(metadata, dict) else {}


def _layer_ids(path: Path) -> list[int] | None:
    text = _metadata(path).get("layer_ids")
    return [int(layer) for layer in text.split(",")] if text else None


def _token_file_shape(path: Path, seq: int) -> tuple[int, ...]:
    """A token file's hidden states as the server will send them: [seq, layers, hidden], from its metadata."""
    layers, hidden = _layer_ids(path), _metadata(path).get("hidden_size", "")
    if not layers or not hidden.isdigit():
        raise SystemExit(f"{path} is a token file without its layer ids and hidden size; re-run extract.py for it.")
    return (seq, len(layers), int(hidden))


def _read_sample(path: Path) -> tuple[list[int], list[int], tuple[int, ...]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        keys = set(handle.keys())
        missing = {"token_ids", "loss_mask"} - keys
        if not is_token_file(path) and "hidden_states" not in keys:
            missing.add("hidden_states")
        if missing:
            raise SystemExit(
                f"{path} lacks {sorted(missing)}: it is not a hidden-state file from extract.py (which writes "
                "token_ids, hidden_states and loss_mask). Re-run extract.py for it."
            )
        token_ids = handle.get_tensor("token_ids").tolist()
        loss_mask = [int(value) for value in handle.get_tensor("loss_mask").tolist()]
        if is_token_file(path):
            shape = _token_file_shape(path, len(token_ids))
        else:
            shape = tuple(handle.get_slice("hidden_states").get_shape())
    if len(shape) != 3 or shape[0] != len(token_ids) or len(loss_mask) != len(token_ids):
        raise SystemExit(
            f"{path}: hidden_states {list(shape)}, {len(token_ids)} token ids and {len(loss_mask)} mask values do "
            "not line up ([seq, n_layers, hidden], [seq], [seq] expected). Re-run extract.py for it."
        )
    return token_ids, loss_mask, shape


def _fingerprint(files: list[Path]) -> list[list[Any]]:
    return [[str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns] for path in files]


def stage(data_dir: Path, staged_dir: Path) -> Staged:
    """Build (or reuse, when the files did not change) speculators' data directory for these files."""
    import datasets

    files = hidden_state_files(data_dir)
    manifest_path = staged_dir / "eyas-staged.json"
    fingerprint = _fingerprint(files)
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("format") == STAGE_FORMAT and manifest.get("files") == fingerprint:
            return Staged(path=staged_dir, **manifest["facts"])
    rows: dict[str, list[Any]] = {"input_ids": [], "loss_mask": [], "seq_len": []}
    layouts = set()
    for path in files:
        token_ids, loss_mask, shape = _read_sample(path)
        rows["input_ids"].append(token_ids)
        rows["loss_mask"].append(loss_mask)
        rows["seq_len"].append(len(token_ids))
        layouts.add((*shape[1:], tuple(_layer_ids(path) or ())))
    if len(layouts) != 1:
        raise SystemExit(
            f"The files in {data_dir} mix layer layouts {sorted(layouts)} ([n_layers, hidden, layer ids]); extract "
            "them all with the same --layers."
        )
    ((num_layers, hidden_size, layer_ids),) = layouts
    tmp = staged_dir.with_name(staged_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    links = tmp / "hidden_states"
    links.mkdir(parents=True)
    online = []
    for row, path in enumerate(files):
        if is_token_file(path):
            online.append(row)
        else:
            (links / f"hs_{row}.safetensors").symlink_to(path.resolve())
    dataset = datasets.Dataset.from_dict(rows)
    dataset.set_format(type="torch")
    dataset.save_to_disk(str(tmp / "dataset"))
    facts = {
        "samples": len(files),
        "tokens": sum(rows["seq_len"]),
        "loss_tokens": sum(map(sum, rows["loss_mask"])),
        "num_layers": num_layers,
        "hidden_size": hidden_size,
        "layer_ids": list(layer_ids) or None,
        "max_len": max(rows["seq_len"]),
        "online": online,
    }
    (tmp / "eyas-staged.json").write_text(json.dumps({"format": STAGE_FORMAT, "files": fingerprint, "facts": facts}))
    shutil.rmtree(staged_dir, ignore_errors=True)
    tmp.replace(staged_dir)
    return Staged(path=staged_dir, **facts)


class PackedBatches:
    """speculators' packed batches of one split: samples packed into rows of `total_seq_len` tokens.

    The order of an epoch depends only on (seed, epoch), so a resumed run replays the same batches. With
    `replicas` > 1 it yields `rank`'s share, as many batches as a torchrun job over that many GPUs steps.
    """

    def __init__(
        self,
        staged: Staged,
        *,
        split: str,
        train_ratio: float,
        total_seq_len: int,
        seed: int,
        replicas: int = 1,
        rank: int = 0,
    ) -> None:
        import torch
        from hs_connectors import FileTransfer
        from speculators.models.eagle3.data import shift_batch
        from speculators.train.data import ArrowDataset, CollateFn
        from speculators.train.distributed_batch_sampler import MultipackDistributedBatchSamplerV2

        self.dataset = ArrowDataset(
            max_len=total_seq_len,
            datapath=str(staged.path / "dataset"),
            transfer=FileTransfer(staged.path / "hidden_states"),
            on_missing="raise",
            train_ratio=train_ratio,
            split=split,  # type: ignore[arg-type]
            hidden_states_dtype=torch.float32,
        )
        self.sampler = MultipackDistributedBatchSamplerV2(
            batch_max_length=total_seq_len,
            lengths=self.dataset.approx_lengths,
            num_replicas=replicas,
            rank=rank,
            seed=seed,
        )
        self.collate = CollateFn(
            total_seq_len,
            staged.hidden_size,
            num_target_layers=staged.num_layers - 1,
            dtype=torch.float32,
            preprocess=shift_batch,
        )

    def rows(self, indices: list[int]) -> list[int]:
        """The staged rows (hs_<row>.safetensors) of this split's sample indices."""
        return [self.dataset._map_to_file_idx(index) for index in indices]

    def epoch(self, epoch: int) -> list[list[int]]:
        self.sampler.set_epoch(epoch)
        return [[int(index) for index in batch] for batch in self.sampler]

    def batch(self, indices: list[int]) -> dict[str, Any]:
        """One packed, shifted batch with exactly the inputs Eagle3DraftModel.forward takes."""
        collated = self.collate([self.dataset[index] for index in indices])
        keys = (
            "hidden_states",
            "input_ids",
            "document_ids",
            "loss_mask",
            "position_ids",
            "verifier_last_hidden_states",
        )
        return {key: collated[key] for key in keys}
