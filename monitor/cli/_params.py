"""Option types shared by the commands."""

from __future__ import annotations

import click

PORT = click.IntRange(0, 65535)  # a TCP port; 0 takes any free one
