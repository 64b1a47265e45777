"""``ipusim schema``: the JSON Schema of a chip file, a model file or a checklist case file."""

from __future__ import annotations

from ._common import print_json

NAME = "schema"
HELP = "print the JSON Schema of a chip file, a model file or a checklist case file"
ORDER = 12


def add_arguments(p):
    p.add_argument(
        "kind",
        choices=("chip", "model", "case"),
        help="chip (--chip FILE), model (--model FILE) or case (checklist --config FILE)",
    )


def schema(kind: str) -> dict:
    """The JSON Schema of a chip file, a model file, or a checklist case file."""
    from .. import hardware, specfiles, workloads

    if kind == "case":
        from ..checklist import config_file

        return config_file.config_json_schema()
    if kind == "model":
        return specfiles.spec_model(workloads.TransformerConfig).model_json_schema()
    tile = specfiles.spec_model(hardware.TileChip, "tile").model_json_schema()
    gpu = specfiles.spec_model(hardware.GpuChip, "gpu").model_json_schema()
    return {
        "title": "Chip",
        "description": "A chip spec file: a tile chip (kind = 'tile') or a GPU "
        "(kind = 'gpu'); SI units, field names as in ipusim.hardware.",
        "oneOf": [tile, gpu],
    }


def run(args) -> int:
    print_json(schema(args.kind))
    return 0
