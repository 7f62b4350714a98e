"""The CPU's bf16 capability decides the compute dtype of every CPU path; here from fake /proc/cpuinfo files."""

from __future__ import annotations

from pathlib import Path

import pytest

from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import server_spec, unit_file_text
from eyas.tools.workloads import cpu_caps

# Abridged from real machines: an AMD EPYC without AVX512 (this project's CI), a Cooper Lake Xeon (AVX512-BF16)
# and a Sapphire Rapids Xeon (AMX). An Intel `vmx flags` line is not the CPU's instruction set.
EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2 sha_ni
vmx flags\t: avx512_bf16 (not an instruction set flag)
bugs\t\t: sysret_ss_attrs spectre_v1
"""
COOPER_LAKE = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"


@pytest.mark.parametrize(("text", "native"), [(EPYC, False), (COOPER_LAKE, True), (SAPPHIRE_RAPIDS, True), ("", False)])
def test_native_bf16_is_read_from_the_flags_line(text: str, native: bool) -> None:
    assert cpu_caps.cpuinfo_has_native_bf16(text) is native


def test_the_compute_dtype_follows_the_capability_and_is_float32_when_unknown(tmp_path: Path) -> None:
    (tmp_path / "epyc").write_text(EPYC)
    (tmp_path / "spr").write_text(SAPPHIRE_RAPIDS)
    assert cpu_caps.cpu_compute_dtype(tmp_path / "epyc") == "float32"
    assert cpu_caps.cpu_compute_dtype(tmp_path / "spr") == "bfloat16"
    assert cpu_caps.cpu_compute_dtype(tmp_path / "absent") == "float32"  # e.g. macOS: no /proc/cpuinfo


@pytest.mark.parametrize(("text", "expected"), [(EPYC, ["--dtype", "float32"]), (SAPPHIRE_RAPIDS, [])])
def test_the_target_server_runs_float32_exactly_when_bf16_is_emulated(
    text: str, expected: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    monkeypatch.setattr(cpu_caps, "CPUINFO", cpuinfo)
    spec = server_spec(EmbeddedTarget(tmp_path / "cache"))
    flags = [(flag, value) for flag, value in zip(spec.argv, spec.argv[1:], strict=False) if flag == "--dtype"]
    assert flags == ([tuple(expected)] if expected else [])
    # The unit file eyas writes shows the very same command.
    assert ("--dtype float32" in unit_file_text(spec)) is bool(expected)
