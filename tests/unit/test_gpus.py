from pathlib import Path

import pytest

from eyas.tools.checks.nvidia_smi import GpuInfo, parse_gpu_csv, parse_topology

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def test_parse_gpu_csv_reads_every_gpu() -> None:
    gpus = parse_gpu_csv((FIXTURES / "nvidia_smi_8gpu_pcie.csv").read_text())
    assert [gpu.index for gpu in gpus] == list(range(8))
    assert gpus[0] == GpuInfo(
        index=0, name="NVIDIA L40S", memory_total_mib=46068, memory_used_mib=41234, utilization_pct=97
    )
    assert gpus[7].memory_used_mib == 41186


def test_parse_gpu_csv_tolerates_blanks_missing_utilization_and_commas_in_names() -> None:
    text = "\n  0, NVIDIA A100-SXM4-80GB, 81920, 0, [N/A]  \n\n1, Odd, Name, 1024, 12, [Not Supported]\n"
    first, second = parse_gpu_csv(text)
    assert first.name == "NVIDIA A100-SXM4-80GB"
    assert first.utilization_pct is None
    assert second.name == "Odd, Name"
    assert (second.memory_total_mib, second.memory_used_mib, second.utilization_pct) == (1024, 12, None)


def test_parse_gpu_csv_names_the_bad_line() -> None:
    failure = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    with pytest.raises(ValueError, match=r"line 1 is not nvidia-smi GPU CSV .*couldn't communicate") as info:
        parse_gpu_csv(failure)
    assert "index,name,memory.total,memory.used,utilization.gpu" in str(info.value)


def test_parse_gpu_csv_rejects_non_numeric_memory() -> None:
    with pytest.raises(ValueError, match=r"line 2 .*'1, NVIDIA L40S, lots, 0, 5'"):
        parse_gpu_csv("0, NVIDIA L40S, 46068, 0, 5\n1, NVIDIA L40S, lots, 0, 5\n")


def test_parse_topology_pcie_host() -> None:
    topology = parse_topology((FIXTURES / "nvidia_smi_topo_pcie.txt").read_text())
    links = topology["links"]
    assert len(links) == 28  # 8 choose 2: each pair once, no NIC cells
    assert (links["GPU0-GPU1"], links["GPU0-GPU2"], links["GPU3-GPU4"]) == ("PIX", "NODE", "SYS")
    assert "GPU1-GPU0" not in links
    assert topology["interconnect"] == "pcie"


def test_parse_topology_nvlink_host_with_underlined_header() -> None:
    topology = parse_topology((FIXTURES / "nvidia_smi_topo_nvlink.txt").read_text())
    assert len(topology["links"]) == 28
    assert set(topology["links"].values()) == {"NV18"}
    assert topology["interconnect"] == "nvlink"


def test_parse_topology_mixed_single_and_garbage() -> None:
    mixed = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tNV4\tSYS\t0-7\n"
        "GPU1\tNV4\t X \tSYS\t0-7\n"
        "GPU2\tSYS\tSYS\t X \t0-7\n"
    )
    assert parse_topology(mixed) == {
        "links": {"GPU0-GPU1": "NV4", "GPU0-GPU2": "SYS", "GPU1-GPU2": "SYS"},
        "interconnect": "mixed",
    }
    single = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n"
    assert parse_topology(single) == {"links": {}, "interconnect": "unknown"}
    with pytest.raises(ValueError, match="not `nvidia-smi topo -m` output"):
        parse_topology("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
