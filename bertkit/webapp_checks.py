"""What `bertkit app` refuses before it imports the web stack: a language or runs folder that cannot work, a
page open to the network without a password, a password that would be typed where `ps` and shell history keep it,
and the extra that is not installed."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import sys
from pathlib import Path

from .errors import BertkitError
from .webapp_text import LANGUAGES

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
APP_MODULES = {"fastapi": "fastapi", "uvicorn": "uvicorn", "multipart": "python-multipart", "jinja2": "jinja2"}


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_app_options(host: str, auth: str | None, runs_dir: str, lang: str) -> None:
    """(The port is checked as it is bound: serve.listening_socket.)"""
    if lang not in LANGUAGES:
        raise BertkitError(f"--lang {lang}: use {' or '.join(LANGUAGES)}")
    if not is_loopback(host) and not auth:
        raise BertkitError(f"--host {host} opens the page to other machines, and it starts processes and reads "
                           f"files: add --auth USER (the password from $BERTKIT_APP_PASSWORD or asked), or leave "
                           f"--host out (127.0.0.1: this machine only)")
    if auth is not None and (not auth.strip() or ":" in auth):
        raise BertkitError(f"--auth {auth!r}: give a user name (no ':'); the password comes from "
                           f"$BERTKIT_APP_PASSWORD or is asked")
    if Path(runs_dir).exists() and not Path(runs_dir).is_dir():
        raise BertkitError(f"--runs-dir {runs_dir} is a file — give a folder (created if missing)")
    missing = [package for module, package in APP_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise BertkitError(f"bertkit app needs {', '.join(missing)} — pip install \"bertkit[app]\"")


def app_password(user: str, variable: str) -> str:
    """The password for --auth: the environment variable, else asked on the terminal (twice), never an argument."""
    password = os.environ.get(variable)
    if password is None:
        if not sys.stdin.isatty():
            raise BertkitError(f"--auth {user}: set the password in ${variable} (no terminal to ask it on)")
        import typer

        password = typer.prompt(f"password for {user}", hide_input=True, confirmation_prompt=True)
    if len(password) < 8:
        raise BertkitError(f"the password for --auth {user} is shorter than 8 characters — choose a longer one")
    return password


__all__ = ["is_loopback", "check_app_options", "app_password"]
