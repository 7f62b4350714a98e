"""Does the host's vLLM know every flag and speculative method that eyas itself will pass it?

Research advice is checked against the host's own `--help` (agents/research_report.py); the servers eyas starts deserve
the same check before anything is launched. The flags come from the very builders that start those servers (the
extraction server's argv, the evaluation's, production's inherited flags), the methods from their speculative
configs, and each is looked up in the `--help=all` of the host's installed vLLM (cli_help.py, cached on the host
by version). The evaluation always runs, so a flag or method it lacks is a FAIL; the vllm extraction backend is
one choice of two, so its gaps leave the check OK and the plan refuses that backend (tools/planning/paths.py).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from eyas.tools.checks.host_facts import VLLM_SERVER_HELP, found_in, read_cli_help
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.checks.service import read_unit
from eyas.tools.launch.inherited import inherit_launch
from eyas.tools.workloads.extract_server import extraction_argv
from eyas.tools.workloads.vllm_server import flag_name, server_argv

# The flags each of eyas's servers sets itself (beyond model, host, port and api-server-count), and what a vLLM
# without CUDA gets on top (eval_servers.py's cpu_server_args, extract_vllm's CPU dtype).
EVALUATE_OWN = ("--seed", "--speculative-config")
EXTRACT_OWN = ("--speculative-config", "--kv-transfer-config")
CPU_OWN = ("--dtype", "--enforce-eager")
# The speculative method each server's --speculative-config names.
METHODS = {"extraction": "extract_hidden_states", "evaluation": "eagle3"}
REQUIRED = ("evaluation",)  # the servers every run starts; extraction's only on the vllm backend


class ServerNeeds(BaseModel):
    """One server eyas starts: the flags and method it passes, and those the host's vLLM does not list."""

    flags: list[str]
    method: str
    missing: list[str]


def server_flags(production: list[list[str | None]]) -> dict[str, list[str]]:
    """Every flag name each server passes, built by the same functions that start it (placeholder values)."""
    inherited = [flag_name(str(flag)) for flag, _ in production]
    extraction: set[str] = set()
    for connector in ("stock", "cpu"):
        argv = extraction_argv("python", "/model", [2], "/staging", 1, 2, connector, [], ("--dtype", "float32"))
        extraction |= {flag_name(word) for word in argv if word.startswith("--")}
    evaluation = server_argv("python", Path("/model"), 1, *EVALUATE_OWN, *CPU_OWN)
    return {
        "extraction": sorted(extraction | set(inherited)),
        "evaluation": sorted({flag_name(word) for word in evaluation if word.startswith("--")} | set(inherited)),
    }


def needs(production: list[list[str | None]], helps: dict[str, str]) -> dict[str, ServerNeeds]:
    """Per server: what it passes and what the help lacks."""
    servers = {}
    for name, flags in server_flags(production).items():
        method = METHODS[name]
        missing = [item for item in (*flags, method) if not found_in(item, helps)]
        servers[name] = ServerNeeds(flags=flags, method=method, missing=missing)
    return servers


def check_server_flags(ctx: CheckContext) -> CheckResult:
    facts = read_cli_help(ctx.host, ctx.host_config, dists=(), inline=True)
    helps = facts.help  # only the vllm server's: no distribution was asked for
    if not helps:
        problems = "; ".join(facts.problems) or "no help text came back"
        return CheckResult(
            name="server_flags", status=Status.WARN,
            message=f"the flags of eyas's own vLLM servers could not be checked ({problems}); run "
            f"`{ctx.host_config.python} -m {VLLM_SERVER_HELP}` on {ctx.host.name} to see why.",
        )  # fmt: skip
    unit = read_unit(ctx)
    production: list[list[str | None]] = [list(pair) for pair in inherit_launch(unit).flags]
    servers = needs(production, helps)
    facts_out = {"help": sorted(helps), "servers": {name: server.model_dump() for name, server in servers.items()}}
    failing = {name: server.missing for name, server in servers.items() if server.missing and name in REQUIRED}
    optional = {name: server.missing for name, server in servers.items() if server.missing and name not in REQUIRED}
    if failing:
        listed = "; ".join(f"the {name} server passes {', '.join(missing)}" for name, missing in failing.items())
        return CheckResult(
            name="server_flags", status=Status.FAIL, facts=facts_out,
            message=f"{listed}, which the host's `{sorted(helps)[0]}` does not list: this vLLM is older or newer "
            "than eyas's servers expect. Install a vLLM that has them (see the compat check), then verify again.",
        )  # fmt: skip
    counted = sum(len(server.flags) + 1 for server in servers.values())
    note = "".join(
        f"; the {name} server (a choice, not needed by default) would pass {', '.join(missing)}, not listed"
        for name, missing in optional.items()
    )
    return CheckResult(
        name="server_flags", status=Status.OK, facts=facts_out,
        message=f"all {counted} flags and methods of eyas's own vLLM servers are in the host's --help{note}",
    )  # fmt: skip
