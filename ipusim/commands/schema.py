"""``ipusim schema``: the JSON Schema of a chip file, a model file or a checklist case file."""

from __future__ import annotations

from .. import specfiles
from ._common import print_json

NAME = "schema"
HELP = "print the JSON Schema of a chip file, a model file or a checklist case file"
ORDER = 12


def add_arguments(p):
    p.add_argument("kind", choices=("chip", "model", "case"),
                   help="chip (--chip FILE), model (--model FILE) or case (checklist --config FILE)")


def run(args) -> int:
    print_json(specfiles.schema(args.kind))
    return 0
