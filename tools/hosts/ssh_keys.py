"""The keys an SSH login uses, read before dialling: the private key file (its passphrase from the environment) and
the host keys eyas trusts. A key file or a known_hosts file that cannot be used is a problem on this machine, not the
host's: each refusal names the file and the fix."""

from __future__ import annotations

from pathlib import Path

import paramiko

from eyas.tools.errors import AuthFailed, HostKeyUnknown
from eyas.tools.settings.config import secret
from eyas.tools.settings.local_files import MISSING, not_a_regular_file

# Tried in this order on a key file, as paramiko's own client does.
_KEY_TYPES: tuple[type[paramiko.PKey], ...] = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)


def load_key(host: str, key_file: str | None, passphrase_env: str | None) -> paramiko.PKey | None:
    """The private key in `key_file` for the host named `host`; None without one (ssh-agent and ~/.ssh keys sign)."""
    if key_file is None:
        return None
    problem = not_a_regular_file(Path(key_file))
    if problem not in (None, MISSING):  # a FIFO or /dev/zero would hang the read below, or never end it
        raise AuthFailed(
            f"The key file {key_file} for host '{host}' {problem}. Point key_file at the private key "
            "(OpenSSH or PEM; not the .pub), e.g. ~/.ssh/id_ed25519."
        )
    passphrase = secret(passphrase_env)
    if passphrase_env and passphrase is None:
        raise AuthFailed(
            f"The passphrase of {key_file} for host '{host}' is to come from the environment "
            f"variable {passphrase_env} (key_passphrase_env), which is not set here. Export it."
        )
    problem = "no key type fits"
    for key_type in _KEY_TYPES:
        try:
            return key_type.from_private_key_file(key_file, passphrase)
        except paramiko.PasswordRequiredException:
            raise AuthFailed(
                f"The key {key_file} for host '{host}' is protected by a passphrase, and eyas never "
                "prompts. Put the passphrase in an environment variable and name it in the host's config "
                f'(key_passphrase_env = "EYAS_KEY_PASSPHRASE"), or load the key into ssh-agent (ssh-add '
                f"{key_file}) and remove key_file, so the agent signs."
            ) from None
        except OSError as exc:
            raise AuthFailed(
                f"The key file {key_file} for host '{host}' cannot be read ({exc.strerror or exc}); "
                "fix key_file in the config."
            ) from None
        except (paramiko.SSHException, ValueError) as exc:
            problem = str(exc)
    if passphrase is not None:
        raise AuthFailed(
            f"The key {key_file} for host '{host}' does not open with the passphrase in "
            f"{passphrase_env} ({problem}): the passphrase is wrong or the file is damaged."
        )
    raise AuthFailed(
        f"The key file {key_file} for host '{host}' is not a private key eyas can read ({problem}). "
        "Point key_file at the private key (OpenSSH or PEM; not the .pub), e.g. ~/.ssh/id_ed25519."
    )


def trust_known_hosts(client: paramiko.SSHClient, host: str, known_hosts: str, where: str, keyscan: str) -> None:
    """Give `client` the host keys in `known_hosts`, the only ones it will accept, for the host named `host` at
    `where`; `keyscan` is the command that reads that host's key, for a person to record it."""
    problem = not_a_regular_file(Path(known_hosts))
    if problem == MISSING:
        raise HostKeyUnknown(
            f"The known_hosts file {known_hosts} for host '{host}' does not exist, so "
            f"{where} cannot be authenticated. If this is the right machine, record its key: "
            f"{keyscan} >> {known_hosts} (and compare the "
            "fingerprint with the one the machine's owner gives you)."
        )
    if problem is None:  # a regular file: paramiko reads it as text
        try:
            client.load_host_keys(known_hosts)
        except UnicodeDecodeError as exc:
            problem = f"is not text (not UTF-8 at byte {exc.start})"
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
    if problem is not None:
        raise HostKeyUnknown(
            f"The known_hosts file {known_hosts} for host '{host}' {problem}, so {where} cannot "
            f"be authenticated. Point known_hosts at a text file of the host keys you trust ({keyscan} > FILE "
            "writes one; compare its fingerprint with the owner's)."
        )
