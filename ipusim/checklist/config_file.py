"""The checklist's config file (TOML or JSON; ``examples/*.toml``) and the traffic files it
names: its strict schema (``config_json_schema``), ``case_from_dict``, ``load_case``, and the
readers of an arrivals file and of a named or file length distribution. A config's keys are the
command line's flags with underscores; the case it builds is a ``checklist.case.Case``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import lengths as _lengths
from .. import workloads
from .._validate import read_text_file
from ..prices import Prices
from .case import Case, Training, histogram_sample, parse_candidate, read_lengths_file

# ---------------------------------------------------------------------------------------
# The config-file schema (TOML / JSON). Keys are the CLI's flags with underscores
# (``rate_per_s`` <-> ``--rate-per-s``, ``slo_p99_ms`` <-> ``--slo-p99-ms``); nothing else is
# accepted. Validated with pydantic v2 models: strict types (a boolean must be a boolean, a
# whole number a whole number), unknown keys refused, frozen. Imported only here, when a
# config is read (pydantic adds ~0.1 s to a checklist run that already imports Numba).
# ---------------------------------------------------------------------------------------
MAX_CONFIG_DEPTH = 6  # tables within tables: the deepest valid config has 4 ([[candidates]].chip)
RENAMED = {
    "rate": "rate_per_s",
    "slo_ms": "slo_p99_ms",
    "slo_p99_s": "slo_p99_ms (milliseconds)",
    "slo_s": "slo_p99_ms (milliseconds)",
}
_EXPECT = {  # what a field takes, for the one-line error
    "traffic.arrivals": "a list of times (s) or a file name",
    "traffic.lengths": "a list of lengths, a {length = count} table, a file name, or 'wikipedia'/'squad'",
    "model": "a preset name or a table of fields",
    "case.model": "a preset name or a table of fields",
    "candidates": "a list of tables (chip, count, mode, policy) or 'chip:count' strings",
    "chip": "a preset name or a table of fields",
}


def _schema():
    """The pydantic models (built on first use, so importing ipusim stays quick)."""
    global _SCHEMA
    if _SCHEMA is not None:
        return _SCHEMA
    from typing import Literal, Union

    from pydantic import BaseModel, ConfigDict, Field

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    Number = Union[int, float]
    Scalar = Union[str, int, float, bool]

    class CaseSec(Strict):
        name: str = Field("", max_length=200)
        model: Union[str, dict[str, Scalar], None] = None
        task: Literal["auto", "classify", "generate"] = "auto"
        output_tokens: int = Field(128, ge=1, le=1 << 20)
        seed: int = Field(0, ge=0, le=2**63 - 1)
        inference: bool = True

    class TrafficSec(Strict):
        rate_per_s: Number | None = Field(None, gt=0, le=1e7)
        slo_p99_ms: Number | None = Field(None, gt=0, le=1e10)
        long_fraction: Number | None = Field(None, ge=0, le=1)
        lengths: Union[str, list[int], dict[str, Number], None] = None
        arrivals: Union[str, list[Number], None] = None

    class CandidateSec(Strict):
        chip: Union[str, dict[str, Scalar]]
        count: int = Field(1, ge=1, le=65_536)
        mode: Literal["auto", "padded", "packed"] = "auto"
        policy: Literal["auto", "static", "dynamic"] = "auto"

    class PricesSec(Strict):
        usd_per_chip_hour: dict[str, Number] = {}
        usd_per_kwh: Number | None = None

    class TrainingSec(Strict):
        enabled: bool = True
        models: list[str] = Field(
            default_factory=lambda: list(Training.models), min_length=1, max_length=64
        )
        token_budget: Number = Field(Training.token_budget, ge=1, le=1e16)
        seq_len: int = Field(Training.seq_len, ge=1, le=1 << 20)

    class Config(Strict):
        case: CaseSec = CaseSec()
        traffic: TrafficSec = TrafficSec()
        model: Union[str, dict[str, Scalar], None] = None
        candidates: list[Union[str, CandidateSec]] = Field(default_factory=list, max_length=64)
        prices: PricesSec = PricesSec()
        training: TrainingSec | None = None
        questionnaire: dict[str, str] = {}

    _SCHEMA = Config
    return Config


_SCHEMA = None


def config_json_schema() -> dict:
    """The JSON Schema of a checklist config file (``python -m ipusim schema case``)."""
    return _schema().model_json_schema()


def _depth(x, limit: int, path: str = "") -> None:
    """Refuse configs nested deeper than ``limit`` (before any recursion of ours or pydantic's)."""
    stack = [(x, 0, path)]
    while stack:
        v, d, p = stack.pop()
        if d > limit:
            raise ValueError(
                f"{p or 'config'}: nested {d} levels deep; at most {limit} (no valid config is deeper)"
            )
        if isinstance(v, dict):
            stack.extend((w, d + 1, f"{p}.{k}" if p else str(k)) for k, w in v.items())
        elif isinstance(v, list):
            stack.extend((w, d + 1, f"{p}[{i}]") for i, w in enumerate(v))


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _one_line(err) -> str:
    """The first problem of a pydantic ValidationError as ``path: what is wrong, got value``."""

    def clean(loc):  # drop pydantic's union-member tags ("str", "list[float]", model names)
        return [
            x
            for x in loc
            if not (
                isinstance(x, str)
                and (
                    "[" in x
                    or x
                    in (
                        "str",
                        "int",
                        "float",
                        "bool",
                        "list",
                        "dict",
                        "CandidateSec",
                        "function-after",
                    )
                )
            )
        ]

    errors = err.errors(include_url=False)
    e = max(
        errors, key=lambda x: len(clean(x["loc"]))
    )  # the most specific: deepest path, first of equals
    loc = clean(e["loc"])
    parts = []
    for x in loc:
        parts.append(f"[{x}]" if isinstance(x, int) else (("." if parts else "") + str(x)))
    path = "".join(parts) or "config"
    key = str(loc[-1]) if loc else ""
    if e["type"] == "extra_forbidden":
        hint = f" (renamed: use {RENAMED[key]})" if key in RENAMED else ""
        return f"{path}: unknown key{hint}"
    expect = _EXPECT.get(path) or _EXPECT.get(key)
    if expect is None and isinstance(loc[-1] if loc else None, int) and len(loc) >= 2:
        expect = _EXPECT.get(str(loc[-2]))
    value = e.get("input")
    if expect and e["type"].endswith("_type"):
        return f"{path}: expected {expect}, got {_short(value)}"
    msg = e["msg"].replace("Input should be", "expected").replace("input should be", "expected")
    return f"{path}: {msg[0].lower() + msg[1:]}, got {_short(value)}"


def case_from_dict(d: dict, *, base_dir: Path | None = None, prices: dict | None = None) -> Case:
    """Build a case from the config-file form (see ``examples/*.toml``), validated strictly;
    ``prices`` (chip name -> USD per chip-hour) go over the config's."""
    from pydantic import ValidationError

    if not isinstance(d, dict):
        raise ValueError(
            f"config: expected a table of sections (case, traffic, candidates, ...), "
            f"got {type(d).__name__} {_short(d)}"
        )
    _depth(d, MAX_CONFIG_DEPTH)
    try:
        cfg = _schema().model_validate(d)
    except ValidationError as err:
        raise ValueError(_one_line(err)) from None
    c, t = cfg.case, cfg.traffic
    kw = {
        "name": c.name,
        "task": c.task,
        "output_tokens": c.output_tokens,
        "seed": c.seed,
        "inference": c.inference,
    }
    if c.model is not None and cfg.model is not None:
        raise ValueError("model: given both in [case] and as a [model] table; give it once")
    model_spec = (
        cfg.model if cfg.model is not None else (c.model if c.model is not None else "bert-base")
    )
    if isinstance(model_spec, dict):
        try:
            model_spec = workloads.TransformerConfig(**model_spec)
        except TypeError as err:
            raise ValueError(f"model: custom model: {err}") from None
    kw["model"] = model_spec
    if t.rate_per_s is not None:
        if t.arrivals is not None:
            raise ValueError(
                "traffic: give rate_per_s or arrivals, not both (a trace sets its own rate)"
            )
        kw["rate_per_s"] = float(t.rate_per_s)
    if t.slo_p99_ms is not None:
        kw["slo_p99_s"] = float(t.slo_p99_ms) / 1e3
    if t.lengths is not None and t.long_fraction is not None:
        raise ValueError(
            "traffic: give long_fraction or lengths, not both (lengths would win silently)"
        )
    if t.long_fraction is not None:
        kw["long_fraction"] = float(t.long_fraction)
    seed = c.seed
    lens = t.lengths
    if isinstance(lens, str):
        kw["lengths"], kw["length_source"] = lengths_from_name(lens, base_dir, seed)
    elif isinstance(lens, dict):
        try:
            hist = {int(k): float(v) for k, v in lens.items()}
        except (TypeError, ValueError):
            raise ValueError(
                "traffic.lengths: histogram keys must be whole token lengths and values counts, "
                f'e.g. {{"128" = 10}}; got {dict(list(lens.items())[:3])!r}'
            ) from None
        kw["lengths"], kw["length_source"] = histogram_sample(hist, seed=seed), "histogram"
    elif isinstance(lens, list):
        kw["lengths"], kw["length_source"] = np.asarray(lens), "given"
    arr = t.arrivals
    if isinstance(arr, str) and arr != "poisson":
        kw["arrivals"] = read_arrivals(_resolve(arr, base_dir))
    elif isinstance(arr, list):
        kw["arrivals"] = np.asarray(arr, dtype=float)
    cands = []
    for i, cs in enumerate(cfg.candidates):
        try:
            cands.append(parse_candidate(cs if isinstance(cs, str) else cs.model_dump()))
        except ValueError as err:
            raise ValueError(f"candidates[{i}]: {err}") from None
    kw["candidates"] = tuple(cands)
    kw["prices"] = Prices().with_prices(
        {**cfg.prices.usd_per_chip_hour, **(prices or {})}, cfg.prices.usd_per_kwh
    )
    if cfg.training is not None and cfg.training.enabled:
        tr = cfg.training.model_dump(exclude={"enabled"})
        kw["training"] = Training(**{**tr, "models": tuple(tr["models"])})
    kw["answers"] = dict(cfg.questionnaire)
    return Case(**kw)


def read_arrivals(path) -> np.ndarray:
    """Arrival times (seconds) from a file: an ``arrival_s,length`` trace CSV with a header
    (``ipusim.arrivals.load_trace``; its times), or one time per line."""
    from .. import arrivals

    p = Path(path)
    rows = [
        ln.strip()
        for ln in read_text_file("arrival trace file", p).splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    if rows and "," in rows[0]:
        return arrivals.load_trace(p)[0]
    try:
        float(rows[0]) if rows else None
    except ValueError:
        rows = rows[1:]  # a one-column header such as "time_s"
    out = np.empty(len(rows))
    for i, x in enumerate(rows):
        try:
            out[i] = float(x)
        except ValueError:
            raise ValueError(
                f"arrival trace {str(path)!r}: {x[:40]!r} is not a time in seconds; expected one "
                "time per line, or a CSV with a header 'arrival_s,length'"
            ) from None
    return out


def _resolve(p: str, base_dir: Path | None) -> Path:
    path = Path(p)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        return base_dir / path
    return path


def lengths_from_name(spec: str, base_dir, seed):
    """(lengths, where they came from) for a ``--lengths`` / ``traffic.lengths`` name: a file
    (``read_lengths_file``, relative to ``base_dir`` first) or a shipped dataset."""
    p = _resolve(spec, base_dir)
    if p.is_file():
        return read_lengths_file(p, seed=seed), str(spec)
    h = _lengths.source(spec)  # a dataset, or the one message for a name that is neither
    return h.sample(20_000, seed=seed), h.name


def load_case(path, *, prices: dict | None = None) -> Case:
    """Read a case from a TOML (``.toml``) or JSON (``.json``) file; ``prices`` (chip name ->
    USD per chip-hour, as ``parse_prices`` gives) go over the file's own (``--price``)."""
    text = read_text_file("config file", path, max_bytes=1 << 20)
    p = Path(path)
    kind = "JSON" if p.suffix.lower() == ".json" else "TOML"
    import tomllib  # here: its regexes cost start-up time of every checklist run without a file

    try:
        d = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"config file {str(path)!r} is not valid {kind}: {err}") from None
    except RecursionError:
        raise ValueError(
            f"config file {str(path)!r}: nested too deeply (at most {MAX_CONFIG_DEPTH} levels)"
        ) from None
    if not isinstance(d, dict):
        raise ValueError(
            f"config file {str(path)!r}: the top level must be an object/table of sections "
            f"(case, traffic, candidates, ...), got {type(d).__name__} {str(d)[:40]!r}"
        )
    try:
        return case_from_dict(d, base_dir=p.parent, prices=prices)
    except ValueError as err:
        raise ValueError(f"config file {str(path)!r}: {err}") from None
