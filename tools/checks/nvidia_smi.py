"""Parse what nvidia-smi says about a host's GPUs, so plans use the real cards and links, not guesses."""

import itertools
import re
from collections.abc import Callable, Iterable
from typing import Literal, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")

GPU_QUERY = "index,name,memory.total,memory.used,utilization.gpu"
NVIDIA_SMI_QUERY_ARGS = ["--query-gpu=" + GPU_QUERY, "--format=csv,noheader,nounits"]
# Which card a process runs on is named by UUID only, so the UUIDs are asked for separately.
NVIDIA_SMI_UUID_ARGS = ["--query-gpu=index,uuid", "--format=csv,noheader"]
APPS_QUERY = "pid,process_name,used_memory,gpu_uuid"
NVIDIA_SMI_APPS_ARGS = ["--query-compute-apps=" + APPS_QUERY, "--format=csv,noheader,nounits"]

_EXPECTED_CSV = f"expected '{GPU_QUERY}' as printed by nvidia-smi {' '.join(NVIDIA_SMI_QUERY_ARGS)}"
# nvidia-smi prints these instead of a number when a field does not apply to the card or driver.
_NOT_AVAILABLE = {"[N/A]", "N/A", "[Not Supported]"}
_PCIE_PATHS = {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}
_GPU_LABEL = re.compile(r"GPU\d+")
# `topo -m` underlines its header with terminal escapes even when its output is piped.
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

Interconnect = Literal["nvlink", "pcie", "mixed", "unknown"]


class GpuInfo(BaseModel):
    """One GPU as nvidia-smi reports it; memory in MiB, utilization None where the driver gives none."""

    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int
    utilization_pct: int | None


class GpuProcess(BaseModel):
    """One compute process on one GPU (a process on several GPUs is one row per GPU), memory in MiB."""

    model_config = ConfigDict(frozen=True)

    pid: int
    name: str
    used_mib: int | None
    gpu_uuid: str


class Topology(TypedDict):
    """GPU pair -> link type (e.g. {"GPU0-GPU1": "NV18"}) and the kind of interconnect they add up to."""

    links: dict[str, str]
    interconnect: Interconnect


def _parse_csv(text: str, min_fields: int, build: Callable[[list[str]], T], kind: str, expected: str) -> list[T]:
    """One `build(fields)` per non-empty line ("No running ..." lines skipped); a line that has fewer than
    `min_fields` fields or that `build` rejects raises one ValueError naming the line and what was expected."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.strip().startswith("No running"):
            continue
        fields = [field.strip() for field in line.split(",")]
        try:
            if len(fields) < min_fields:
                raise ValueError(f"{len(fields)} field(s), need at least {min_fields}")
            rows.append(build(fields))
        except ValueError as error:
            raise ValueError(f"line {number} is not {kind} ({error}): {line.strip()!r}; {expected}") from None
    return rows


def _gpu(fields: list[str]) -> GpuInfo:
    utilization = fields[-1]
    return GpuInfo(
        index=int(fields[0]),
        name=", ".join(fields[1:-3]),
        memory_total_mib=int(fields[-3]),
        memory_used_mib=int(fields[-2]),
        utilization_pct=None if utilization in _NOT_AVAILABLE else int(utilization),
    )


def parse_gpu_csv(text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi` output for NVIDIA_SMI_QUERY_ARGS; raise ValueError on anything else.

    The name is everything between the first field and the last three, so a comma in it cannot shift
    the numbers. Driver errors ("NVIDIA-SMI has failed ...") come out as a ValueError naming the line.
    """
    return _parse_csv(text, 5, _gpu, "nvidia-smi GPU CSV", _EXPECTED_CSV)


def parse_gpu_uuids(text: str) -> dict[str, int]:
    """GPU UUID -> index from `nvidia-smi` NVIDIA_SMI_UUID_ARGS ("0, GPU-5f0c..."); ValueError on anything else."""
    found = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        index, _, uuid = (field.strip() for field in line.partition(","))
        if not index.isdigit() or not uuid.startswith(("GPU-", "MIG-")):
            raise ValueError(f"line {number} is not 'index, uuid' as nvidia-smi prints it: {line.strip()!r}")
        found[uuid] = int(index)
    return found


def _process(fields: list[str]) -> GpuProcess:
    used = fields[-2]
    return GpuProcess(
        pid=int(fields[0]),
        name=", ".join(fields[1:-2]),
        used_mib=None if used in _NOT_AVAILABLE else int(used.removesuffix(" MiB")),
        gpu_uuid=fields[-1],
    )


def parse_compute_apps(text: str) -> list[GpuProcess]:
    """Parse `nvidia-smi` NVIDIA_SMI_APPS_ARGS output ("4242, /usr/bin/python3, 42845, GPU-5f0c...").

    No output means no compute process. The name is everything between the pid and the last two fields, so a
    comma in a path cannot shift them; memory is None where the driver says [N/A] (e.g. inside some containers).
    """
    expected = f"expected '{APPS_QUERY}' as printed by nvidia-smi {' '.join(NVIDIA_SMI_APPS_ARGS)}"
    return _parse_csv(text, 4, _process, "nvidia-smi compute-apps CSV", expected)


def parse_topology(text: str) -> Topology:
    """Parse the GPU-to-GPU cells of `nvidia-smi topo -m`; each unordered pair appears once.

    NV# cells are NVLink, PIX/PXB/PHB/NODE/SYS are PCIe paths. The interconnect is "unknown" when there
    is no GPU pair (one GPU) or a cell is of a kind this parser does not know. Raises ValueError when the
    text has no GPU matrix header at all (e.g. the driver failed).
    """
    lines = [_ANSI_ESCAPE.sub("", line).split() for line in text.splitlines()]
    labelled = [words for words in lines if words and _GPU_LABEL.fullmatch(words[0])]
    if not labelled:
        raise ValueError("no 'GPU0 GPU1 ...' header line: this is not `nvidia-smi topo -m` output")
    # The header is the first GPU-labelled line (its leading tab split away); the rows follow it.
    header, rows = labelled[0], labelled[1:]
    columns = list(itertools.takewhile(_GPU_LABEL.fullmatch, header))
    links = {}
    for row, *cells in rows:
        if row not in columns:
            continue
        after = columns.index(row) + 1
        for column, cell in zip(columns[after:], cells[after:], strict=False):
            links[f"{row}-{column}"] = cell
    return {"links": links, "interconnect": _interconnect(links.values())}


def _interconnect(cells: Iterable[str]) -> Interconnect:
    kinds = {_link_kind(cell) for cell in cells}
    if kinds == {"nvlink"}:
        return "nvlink"
    if kinds == {"pcie"}:
        return "pcie"
    if kinds == {"nvlink", "pcie"}:
        return "mixed"
    return "unknown"


def _link_kind(cell: str) -> str | None:
    if re.fullmatch(r"NV\d+", cell):
        return "nvlink"
    return "pcie" if cell in _PCIE_PATHS else None
