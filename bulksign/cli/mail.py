"""``flask mail …``: outgoing mail set-up (a DKIM key and its DNS record)."""

from __future__ import annotations

import os

import click
from flask.cli import AppGroup

from bulksign.cli.common import fail
from bulksign.mail.dkim_signing import generate_key

mail_cli = AppGroup("mail", help="Outgoing mail set-up.")


@mail_cli.command("dkim-keygen")
@click.option("--domain", required=True, help="The signing domain (the From address's domain).")
@click.option("--selector", required=True, help="The record's selector, e.g. the year: mail2026.")
@click.option(
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Where to write the private key (DKIM_PRIVATE_KEY_PATH); refused if it exists.",
)
@click.option("--bits", default=2048, show_default=True, type=click.IntRange(1024, 4096))
def dkim_keygen_command(domain: str, selector: str, out_path: str, bits: int) -> None:
    """Make a DKIM key, store its private half and print the DNS TXT record to publish."""

    generated = generate_key(domain=domain, selector=selector, bits=bits)
    try:
        # O_EXCL: a key already in use is never overwritten; 0600: only this account reads it.
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail(f"{out_path} exists already; choose another path (a new selector gets a new key).")
    except OSError as exc:
        fail(f"{out_path} cannot be written ({exc.strerror}).")
    with os.fdopen(fd, "wb") as handle:
        handle.write(generated.private_pem)
    click.echo(generated.zone_line())
    click.echo(
        f"Private key written to {out_path}. Publish the record above, then set DKIM_DOMAIN={domain.lower()} "
        f"DKIM_SELECTOR={selector} DKIM_PRIVATE_KEY_PATH={out_path}.",
        err=True,
    )
