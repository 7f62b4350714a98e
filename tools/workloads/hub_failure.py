"""Why a hub download failed, as one sentence that names the cause and the fix (download.py's refusals).

huggingface_hub hides the cause behind its own wrappers: snapshot_download(dry_run=True) raises DryRunError
("check your internet connection or authentication token") *from* the RepositoryNotFoundError it met, and a real
download a LocalEntryNotFoundError from the connection error. The cause is found by walking the exception's
__cause__ and __context__ chain and matching each link against the installed huggingface_hub's own error types,
looked up by name so that a version lacking one of them still works. Standalone: imports nothing from eyas.
"""

from __future__ import annotations

from collections.abc import Iterator

# Connection failures as the HTTP libraries under huggingface_hub name them (httpx for 1.x and later, requests
# before): matched by class name, since which library is installed varies with the version.
UNREACHABLE = {"ConnectError", "ConnectTimeout", "ProxyError", "TimeoutException", "ConnectionError", "Timeout"}
TOKEN_FIX = "give the host a token that can read it (HF_TOKEN in its environment, or `hf auth login` there)"


def chain(error: BaseException) -> Iterator[BaseException]:
    """The error and every error it was raised from or during, outermost first, each once."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def explain(error: BaseException, repo: str, revision: str | None, endpoint: str) -> str | None:
    """The cause and its fix, or None when no link of the chain is one huggingface_hub names."""
    from huggingface_hub import errors

    def kind(name: str) -> type[BaseException] | tuple[()]:
        found = getattr(errors, name, None)
        return found if isinstance(found, type) else ()

    for link in chain(error):
        status = getattr(getattr(link, "response", None), "status_code", None)
        if isinstance(link, kind("GatedRepoError")):  # before RepositoryNotFoundError, which it extends
            return f"{repo} is a gated repository on {endpoint}: accept its terms on the hub, then {TOKEN_FIX}."
        if isinstance(link, kind("RepositoryNotFoundError")):
            return (
                f"No such repository {repo} on {endpoint} (or it is private): check the id for a typo in "
                f"pipeline.drafter_base; if it is private, {TOKEN_FIX}."
            )
        if isinstance(link, kind("RevisionNotFoundError")):
            return f"{repo} has no revision {revision!r} on {endpoint}; check --revision."
        if isinstance(link, kind("DisabledRepoError")):
            return f"{repo} has been disabled by its owner on {endpoint}; choose another drafter."
        if isinstance(link, kind("EgressLimitError")):
            return f"{endpoint} refused the download: the account's download allowance is used up ({link})."
        if isinstance(link, kind("OfflineModeIsEnabled")):
            return f"{repo} cannot be fetched: HF_HUB_OFFLINE is set on the host; unset it where the hub is reachable."
        if isinstance(link, kind("HfHubHTTPError")) and status in (401, 403):
            return f"{endpoint} refused the token for {repo} (HTTP {status}): {TOKEN_FIX}."
        if isinstance(link, kind("HfHubHTTPError")) and isinstance(status, int) and status >= 500:
            return f"{endpoint} answered HTTP {status} for {repo}: the hub is failing; run it again later to resume."
        if UNREACHABLE & {cls.__name__ for cls in type(link).__mro__}:
            return (
                f"The hub {endpoint} could not be reached ({type(link).__name__}: {link}): check the host's network, "
                "HTTPS_PROXY and HF_ENDPOINT, or copy the drafter to the host and set pipeline.drafter_base to its "
                "directory."
            )
    return None


def not_importable(error: ImportError, repo: str, python: str) -> str:
    """Why huggingface_hub cannot be used by this interpreter (absent, or installed broken), and the fix."""
    fix = (
        f"install it into that venv (`{python} -m pip install huggingface_hub`), or copy the drafter to the host and "
        "set pipeline.drafter_base to its directory"
    )
    if error.name == "huggingface_hub":
        return f"{python} has no huggingface_hub package, which downloading {repo} from the hub needs: {fix}."
    return f"huggingface_hub does not import in {python} ({type(error).__name__}: {error}): {fix}."
