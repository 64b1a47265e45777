"""The case a checklist is run on: model, traffic, latency target, candidates, prices.

A case is plain data (frozen dataclasses) built in code, from a dict, or from a TOML /
JSON file (``load_case``), so that the same case can be rerun. Every default that is not
sourced is marked ASSUMPTION in ``ASSUMPTIONS`` below and repeated in the report.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .. import hardware, workloads
from .. import lengths as _lengths
from .._validate import choice, fraction, lengths_array, positive

MODES = ("auto", "padded", "packed")
POLICIES = ("auto", "static", "dynamic")
TASKS = ("auto", "classify", "generate")
ANSWERS = {
    "custom_ops": ("unknown", "none", "few", "many"),
    "dynamic_shapes": ("unknown", "none", "bucketed", "arbitrary"),
    "framework_support": ("unknown", "yes", "partly", "no"),
    "library_support": ("unknown", "yes", "partly", "no"),
    "team_experience": ("unknown", "experienced", "some", "none"),
}

# ---------------------------------------------------------------------------------------
# Prices. There is no sourced price list in this project: every number here is a
# placeholder of a plausible order, to be replaced by the user's own quotes.
# ---------------------------------------------------------------------------------------
DEFAULT_USD_PER_CHIP_HOUR = MappingProxyType({
    "gc2": 0.80,
    "gc200": 1.60,
    "bow": 2.00,
    "a100-40gb": 1.60,
    "a100-80gb": 2.00,
    "h100-sxm": 3.50,
    "h200": 4.00,
})
DEFAULT_USD_PER_KWH = 0.15
PRICE_ASSUMPTION = (
    "ASSUMPTION: chip-hour and energy prices are placeholders, not sourced (the project has no "
    "price list; prices vary by vendor, contract and year). The articles compare 'an IPU of similar "
    "price' to an A100 without a number; GC200 1.60 and A100-80GB 2.00 USD/chip-hour are 20% apart, "
    "inside the articles' own 20-30% saving claims, so a cost reason at these prices can be the price "
    "gap only (the verdict says when). Replace them with your own quotes (config [prices] or "
    "--price CHIP=USD, --usd-per-kwh)."
)

ASSUMPTIONS = MappingProxyType({
    "prices": PRICE_ASSUMPTION,
    "energy": "ASSUMPTION: each deployed chip draws its preset board power (sourced) all the time; "
    "idle power, host, cooling and networking are not counted (PUE 1.0).",
    "long_mix": "ASSUMPTION: the articles do not define 'long text'; a short text is 16-128 tokens "
    "and a long one 256 to the model's maximum, each uniform (as ipusim.lengths.long_text_mix).",
    "output_tokens": "ASSUMPTION: a chat reply is 128 new tokens unless the case says otherwise.",
    "verdict_weights": "ASSUMPTION: the verdict thresholds and the points each reason carries are "
    "this checklist's policy (a judgement), not measurements; they are listed in the report.",
    "questionnaire_points": "ASSUMPTION: the risk points of each questionnaire answer are a "
    "judgement; they rank answers, they are not measured.",
    "training_model": "ASSUMPTION: training time comes from ipusim.training on 1,024 chips of each kind: "
    "one GPU matmul efficiency set from Megatron-LM's GPT-3 175B run (in sample), one tile GEMM "
    "efficiency from a measured GEMM (JIA-FT), an assumed Streaming Memory bandwidth (hardware "
    "presets), collectives at published link rates, no overlap of communication with compute.",
    "multi_chip": "ASSUMPTION: a replica spread over m chips is a pipeline: each chip runs a stage of "
    "ceil(layers / m) layers (simulated, embeddings and output head left to the first and last stage), "
    "a batch takes m x the stage time plus the activation hops over the links, and m batches are in "
    "flight at once.",
})


@dataclass(frozen=True)
class Candidate:
    """One deployment to evaluate: ``count`` chips of one kind, a padding mode and a policy."""

    chip: hardware.TileChip | hardware.GpuChip
    count: int = 1
    mode: str = "auto"  # "padded", "packed", or "auto" (try both, keep the better)
    policy: str = "auto"  # "static", "dynamic", or "auto" (search)

    def __post_init__(self):
        object.__setattr__(self, "chip", hardware.chip(self.chip))
        object.__setattr__(self, "count", positive("candidate count", self.count, integer=True))
        choice("candidate mode", self.mode, MODES)
        choice("candidate policy", self.policy, POLICIES)

    @property
    def label(self) -> str:
        return f"{self.chip.name} x{self.count}"

    def to_dict(self) -> dict:
        return {"chip": self.chip.name, "kind": self.chip.kind, "count": self.count,
                "mode": self.mode, "policy": self.policy}


@dataclass(frozen=True)
class Prices:
    """Prices in US dollars. Defaults are ASSUMPTIONS (see ``PRICE_ASSUMPTION``)."""

    usd_per_chip_hour: MappingProxyType = field(default_factory=lambda: dict(DEFAULT_USD_PER_CHIP_HOUR))
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    user_set: tuple = ()  # names of prices the user gave (chip names and/or "kwh")

    def __post_init__(self):
        d = {str(k).lower(): positive(f"price of {k} per chip-hour", v) for k, v in dict(self.usd_per_chip_hour).items()}
        object.__setattr__(self, "usd_per_chip_hour", MappingProxyType(d))
        object.__setattr__(self, "usd_per_kwh", positive("usd_per_kwh", self.usd_per_kwh))
        object.__setattr__(self, "user_set", tuple(self.user_set))

    def chip_hour(self, c) -> float:
        name = c.name if hasattr(c, "name") else str(c)
        if name not in self.usd_per_chip_hour:
            raise ValueError(
                f"no price per chip-hour for chip {name!r}: give one with --price {name}=USD "
                "or in the config's [prices.usd_per_chip_hour] table"
            )
        return self.usd_per_chip_hour[name]

    def is_assumed(self, name: str) -> bool:
        return name not in self.user_set

    def with_prices(self, chips: dict | None = None, usd_per_kwh: float | None = None) -> Prices:
        d = dict(self.usd_per_chip_hour)
        user = set(self.user_set)
        for k, v in (chips or {}).items():
            d[str(k).lower()] = v
            user.add(str(k).lower())
        kwh = self.usd_per_kwh
        if usd_per_kwh is not None:
            kwh = usd_per_kwh
            user.add("kwh")
        return Prices(d, kwh, tuple(sorted(user)))


@dataclass(frozen=True)
class Training:
    """What to check for training: models, token budget and sequence length.

    Defaults follow GPT-3 (Brown et al. 2020, Table 2.1 and §2.2): 300B training tokens,
    2,048-token context. The global batch is each model's published batch in tokens
    (``ipusim.training.RECIPES``) cut into sequences of ``seq_len``.
    """

    models: tuple = ("llama-2-7b", "llama-2-70b", "gpt-3-175b")
    token_budget: float = 300e9  # tokens; Brown et al. 2020 trained GPT-3 on 300B tokens
    seq_len: int = 2048  # tokens; GPT-3 context (Brown et al. 2020)

    def __post_init__(self):
        ms = tuple(workloads.model(m) for m in self.models)
        if not ms:
            raise ValueError("training.models is empty: name at least one model")
        object.__setattr__(self, "models", ms)
        positive("training.token_budget", self.token_budget)
        positive("training.seq_len", self.seq_len, integer=True)

    def to_dict(self) -> dict:
        return {"models": [m.name for m in self.models], "token_budget": self.token_budget,
                "seq_len": self.seq_len}


@dataclass(frozen=True)
class Case:
    """A checklist case. Times in seconds, rates in requests/s, lengths in tokens.

    Give the sequence lengths as ``long_fraction`` (a mix of short and long texts),
    ``lengths`` (an array of lengths, or a histogram dict ``{length: count}``), or
    ``length_source`` (a file path or a named histogram such as "wikipedia", "squad").
    """

    model: workloads.TransformerConfig = "bert-base"
    rate_per_s: float = 300.0  # offered load, requests/s (mean)
    slo_p99_s: float = 0.050  # latency target on the 99th percentile, seconds
    candidates: tuple = ()
    long_fraction: float | None = 0.4
    lengths: np.ndarray | None = None  # explicit lengths (a sample) or None
    length_source: str = ""  # file path or named histogram it came from ("" if none)
    arrivals: np.ndarray | None = None  # arrival trace (seconds, sorted) or None = Poisson
    task: str = "auto"  # "classify" (encoder forward), "generate" (prompt + reply), "auto"
    output_tokens: int = 128  # reply tokens for "generate" (ASSUMPTION default)
    prices: Prices = field(default_factory=Prices)
    training: Training | None = None
    inference: bool = True  # run checks 1-5 (False: a training-only case)
    answers: MappingProxyType = field(default_factory=dict)
    name: str = ""
    seed: int = 0

    def __post_init__(self):
        m = workloads.model(self.model)
        object.__setattr__(self, "model", m)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative whole number, got {self.seed!r}")
        if self.arrivals is not None:
            arr = np.asarray(self.arrivals, dtype=float)
            if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)):
                raise ValueError("arrival trace must be a 1-D list of at least 2 finite times (seconds)")
            if np.any(np.diff(arr) < 0):
                raise ValueError("arrival trace times must be sorted (non-decreasing)")
            span = float(arr[-1] - arr[0])
            if span <= 0:
                raise ValueError("arrival trace spans zero time: give arrivals spread over time")
            object.__setattr__(self, "arrivals", arr - arr[0])
            object.__setattr__(self, "rate_per_s", (arr.size - 1) / span)
        if isinstance(self.rate_per_s, (int, float)) and not isinstance(self.rate_per_s, bool) and self.rate_per_s == 0:
            raise ValueError(
                "rate_per_s is 0: with zero traffic there is nothing to serve and no cost per request; "
                "give the expected mean arrival rate in requests/s (for a training-only case, set "
                "inference = false)"
            )
        object.__setattr__(self, "rate_per_s", positive("rate_per_s (requests/s)", self.rate_per_s))
        object.__setattr__(self, "slo_p99_s", positive("slo_p99_s (seconds)", self.slo_p99_s))
        task = choice("task", self.task, TASKS)
        if task == "auto":
            task = "classify" if m.kind == "encoder" else "generate"
        if task == "generate" and m.kind == "encoder":
            raise ValueError(f"task 'generate' needs a decoder model; {m.name} is an encoder")
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "output_tokens", positive("output_tokens", self.output_tokens, integer=True))
        if self.lengths is not None:
            lens = self.lengths
            if isinstance(lens, dict):
                lens = histogram_sample(lens, seed=self.seed)
            lens = lengths_array("lengths", lens)
            if lens.max() > m.max_positions:
                raise ValueError(
                    f"the length distribution reaches {int(lens.max())} tokens, beyond {m.name}'s "
                    f"max_positions {m.max_positions}: truncate the texts or pick a longer model"
                )
            object.__setattr__(self, "lengths", lens)
            object.__setattr__(self, "long_fraction", None)
        elif self.long_fraction is None:
            raise ValueError("give long_fraction or lengths")
        else:
            object.__setattr__(self, "long_fraction", fraction("long_fraction", self.long_fraction))
        cands = tuple(c if isinstance(c, Candidate) else _candidate(c) for c in self.candidates)
        if self.inference and not cands:
            cands = (Candidate("gc200", 1), Candidate("a100-80gb", 1))
        object.__setattr__(self, "candidates", cands)
        if not isinstance(self.prices, Prices):
            raise ValueError("prices must be a Prices object")
        for c in cands:
            self.prices.chip_hour(c.chip)  # raise early for a custom chip without a price
        if self.training is not None and not isinstance(self.training, Training):
            object.__setattr__(self, "training", Training(**dict(self.training)))
        if not self.inference and self.training is None:
            raise ValueError("a case with inference = false must ask for training")
        answers = {}
        for k, v in dict(self.answers).items():
            if k not in ANSWERS:
                raise ValueError(f"unknown questionnaire item {k!r}; valid: {', '.join(ANSWERS)}")
            answers[k] = choice(f"answer to {k}", str(v).lower(), ANSWERS[k])
        object.__setattr__(self, "answers", MappingProxyType(answers))
        if not self.name:
            object.__setattr__(self, "name", f"{m.name} {task}, {self.rate_per_s:g} req/s, p99 <= {self.slo_p99_s * 1e3:g} ms")

    @property
    def max_len(self) -> int:
        """Longest sequence the traffic can hold, tokens."""
        if self.lengths is not None:
            return int(self.lengths.max())
        return self.model.max_positions

    def replace(self, **changes) -> Case:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        if self.lengths is not None:
            lens = {"source": self.length_source or "given", "n": int(self.lengths.size),
                    "mean": float(self.lengths.mean()), "max": int(self.lengths.max())}
        else:
            lens = {"long_fraction": self.long_fraction}
        return {
            "name": self.name, "model": self.model.name, "task": self.task,
            "rate_per_s": self.rate_per_s, "arrivals": "trace" if self.arrivals is not None else "poisson",
            "slo_p99_s": self.slo_p99_s, "lengths": lens,
            "output_tokens": self.output_tokens if self.task == "generate" else None,
            "candidates": [c.to_dict() for c in self.candidates],
            "prices": {"usd_per_chip_hour": dict(self.prices.usd_per_chip_hour),
                       "usd_per_kwh": self.prices.usd_per_kwh, "user_set": list(self.prices.user_set)},
            "training": self.training.to_dict() if self.training else None,
            "inference": self.inference, "answers": dict(self.answers),
            "seed": self.seed,
        }


def histogram_sample(hist: dict, n: int = 20_000, seed: int = 0) -> np.ndarray:
    """A seeded sample of ``n`` lengths from a ``{length: count}`` histogram (``lengths.Histogram.sample``)."""
    try:
        ls = np.array([int(k) for k in hist], dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError(f"length histogram keys must be whole token lengths, got {list(hist)[:3]!r}") from None
    if ls.size == 0 or ls.min() < 1:
        raise ValueError("length histogram needs lengths >= 1")
    counts = np.zeros(int(ls.max()), dtype=float)
    np.add.at(counts, ls - 1, np.array([float(v) for v in hist.values()]))
    return _lengths.Histogram(counts).sample(n, seed=seed)


def read_lengths_file(path, seed: int = 0) -> np.ndarray:
    """Lengths from a file: a ``length,count`` histogram CSV (``lengths.load_histogram``, sampled),
    or lengths one a line (``lengths.load_lengths``)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"lengths file {str(path)!r} not found")
    rows = [ln.strip() for ln in p.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    if not rows:
        raise ValueError(f"lengths file {str(path)!r} holds no lengths")
    try:
        if "," in rows[-1]:
            return _lengths.load_histogram(p).sample(20_000, seed=seed)
        return _lengths.load_lengths(p)
    except ValueError as err:
        raise ValueError(f"lengths file {str(path)!r}: expected 'length,count' rows or one length a line ({err})") from None


NAMED_LENGTHS = {"wikipedia": "wikipedia-512", "squad": "squad-384", "wikipedia-512": "wikipedia-512",
                 "squad-384": "squad-384"}


def named_lengths(name: str, seed: int = 0) -> np.ndarray:
    """A seeded sample of a length histogram shipped with ipusim ("wikipedia", "squad")."""
    key = NAMED_LENGTHS.get(str(name).lower())
    if key is None:
        raise ValueError(f"unknown length histogram {name!r}; valid: {', '.join(NAMED_LENGTHS)} or a file path")
    return _lengths.dataset(key).sample(20_000, seed=seed)


def _chip_from(spec):
    if isinstance(spec, (str, hardware.TileChip, hardware.GpuChip)):
        return hardware.chip(spec)
    if isinstance(spec, dict):
        d = dict(spec)
        kind = d.pop("kind", None)
        base = d.pop("base", None)
        if base is not None:
            try:
                return hardware.chip(base).replace(**d)
            except TypeError as err:
                raise ValueError(f"custom chip based on {base!r}: {err}") from None
        cls = {"tile": hardware.TileChip, "gpu": hardware.GpuChip}.get(kind)
        if cls is None:
            raise ValueError("a custom chip needs kind = 'tile' or 'gpu' (or base = a preset name to modify)")
        try:
            return cls(**d)
        except TypeError as err:
            raise ValueError(f"custom chip: {err}") from None
    raise ValueError(f"chip must be a preset name or a table of fields, got {spec!r}")


def _candidate(spec) -> Candidate:
    if isinstance(spec, str):
        return parse_candidates(spec)[0]
    if isinstance(spec, dict):
        d = dict(spec)
        unknown = set(d) - {"chip", "count", "mode", "policy"}
        if unknown:
            raise ValueError(f"unknown candidate field(s) {sorted(unknown)}; valid: chip, count, mode, policy")
        if "chip" not in d:
            raise ValueError("each candidate needs a chip")
        d["chip"] = _chip_from(d["chip"])
        return Candidate(**d)
    raise ValueError(f"a candidate must be 'chip:count' or a table, got {spec!r}")


def parse_candidates(text: str) -> tuple:
    """``"gc200:4,a100-80gb:2"`` (optionally ``chip:count:mode``) -> candidates."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        bits = part.split(":")
        if len(bits) > 3:
            raise ValueError(f"candidate {part!r}: use CHIP[:COUNT[:MODE]]")
        count = bits[1] if len(bits) > 1 else "1"
        try:
            n = int(count)
        except ValueError:
            raise ValueError(f"candidate {part!r}: count {count!r} is not a whole number") from None
        out.append(Candidate(bits[0], n, *(bits[2:] or [])))
    if not out:
        raise ValueError("no candidates given; e.g. --candidates gc200:1,a100-80gb:1")
    return tuple(out)


def parse_prices(items) -> dict:
    """``["gc200=1.5", "a100-80gb=2"]`` -> ``{"gc200": 1.5, ...}``."""
    out = {}
    for it in items or ():
        if "=" not in it:
            raise ValueError(f"price {it!r}: use CHIP=USD_PER_CHIP_HOUR, e.g. gc200=1.5")
        k, v = it.split("=", 1)
        try:
            out[k.strip().lower()] = float(v)
        except ValueError:
            raise ValueError(f"price {it!r}: {v!r} is not a number") from None
    return out


_CASE_KEYS = {"name", "model", "task", "rate_per_s", "slo_p99_ms", "slo_p99_s", "long_fraction",
              "lengths", "arrivals", "output_tokens", "seed", "inference"}


def case_from_dict(d: dict, *, base_dir: Path | None = None) -> Case:
    """Build a case from the config-file form (see ``examples/*.toml``)."""
    d = dict(d)
    top = dict(d.pop("case", {}))
    traffic = dict(d.pop("traffic", {}))
    merged = {**top, **traffic}
    unknown_sections = set(d) - {"candidates", "prices", "training", "questionnaire", "model"}
    if unknown_sections:
        raise ValueError(f"unknown config section(s) {sorted(unknown_sections)}; valid: case, traffic, "
                         "model, candidates, prices, training, questionnaire")
    unknown = set(merged) - _CASE_KEYS
    if unknown:
        raise ValueError(f"unknown case/traffic key(s) {sorted(unknown)}; valid: {', '.join(sorted(_CASE_KEYS))}")
    kw = {}
    model_spec = d.pop("model", None) or merged.pop("model", "bert-base")
    if isinstance(model_spec, dict):
        try:
            model_spec = workloads.TransformerConfig(**model_spec)
        except TypeError as err:
            raise ValueError(f"custom model: {err}") from None
    kw["model"] = model_spec
    if "slo_p99_ms" in merged:
        kw["slo_p99_s"] = positive("slo_p99_ms", merged.pop("slo_p99_ms")) / 1e3
    for k in ("name", "task", "rate_per_s", "slo_p99_s", "long_fraction", "output_tokens", "seed", "inference"):
        if k in merged:
            kw[k] = merged[k]
    try:
        seed = int(kw.get("seed", 0))
    except (TypeError, ValueError):
        raise ValueError(f"seed must be a non-negative whole number, got {kw.get('seed')!r}") from None
    if "seed" in kw:
        kw["seed"] = seed
    lens = merged.get("lengths")
    if lens is not None and "long_fraction" in merged:
        raise ValueError("give long_fraction or lengths, not both (lengths would win silently)")
    if lens is not None:
        if isinstance(lens, str):
            kw["lengths"], kw["length_source"] = _lengths_from_name(lens, base_dir, seed)
        elif isinstance(lens, dict):
            try:
                hist = {int(k): float(v) for k, v in lens.items()}
            except (TypeError, ValueError):
                raise ValueError("lengths histogram: keys must be whole token lengths and values counts, "
                                 f"e.g. {{\"128\" = 10}}; got {dict(list(lens.items())[:3])!r}") from None
            kw["lengths"], kw["length_source"] = histogram_sample(hist, seed=seed), "histogram"
        else:
            kw["lengths"], kw["length_source"] = np.asarray(lens), "given"
    arr = merged.get("arrivals")
    if isinstance(arr, str) and arr != "poisson":
        kw["arrivals"] = read_arrivals(_resolve(arr, base_dir))
    elif isinstance(arr, list):
        kw["arrivals"] = np.asarray(arr, dtype=float)
    kw["candidates"] = tuple(_candidate(c) for c in d.get("candidates", ()))
    pr = dict(d.get("prices", {}))
    unknown = set(pr) - {"usd_per_chip_hour", "usd_per_kwh"}
    if unknown:
        raise ValueError(f"unknown price key(s) {sorted(unknown)}; valid: usd_per_chip_hour, usd_per_kwh")
    kw["prices"] = Prices().with_prices(pr.get("usd_per_chip_hour"), pr.get("usd_per_kwh"))
    tr = d.get("training")
    if tr is not None:
        tr = dict(tr)
        if tr.pop("enabled", True):
            try:
                kw["training"] = Training(**tr)
            except TypeError as err:
                raise ValueError(f"[training]: {err}") from None
    kw["answers"] = dict(d.get("questionnaire", {}))
    return Case(**kw)


def read_arrivals(path) -> np.ndarray:
    """Arrival times (seconds) from a file: an ``arrival_s,length`` trace CSV with a header
    (``ipusim.arrivals.load_trace``; its times), or one time per line."""
    from .. import arrivals

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"arrival trace file {str(path)!r} not found")
    rows = [ln.strip() for ln in p.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    if rows and "," in rows[0]:
        return arrivals.load_trace(p)[0]
    try:
        float(rows[0]) if rows else None
    except ValueError:
        rows = rows[1:]  # a one-column header such as "time_s"
    try:
        return np.array([float(x) for x in rows])
    except ValueError:
        raise ValueError(f"arrival trace {str(path)!r}: expected one time in seconds per line, or a CSV "
                         "with a header 'arrival_s,length'") from None


def _resolve(p: str, base_dir: Path | None) -> Path:
    path = Path(p)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        return base_dir / path
    return path


def _lengths_from_name(spec: str, base_dir, seed):
    p = _resolve(spec, base_dir)
    if p.is_file():
        return read_lengths_file(p, seed=seed), str(spec)
    if spec.lower() in NAMED_LENGTHS:
        return named_lengths(spec.lower(), seed=seed), NAMED_LENGTHS[spec.lower()]
    raise ValueError(f"lengths {spec!r} is neither a file nor a named histogram (wikipedia, squad)")


def load_case(path) -> Case:
    """Read a case from a TOML (``.toml``) or JSON (``.json``) file."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"config file {str(path)!r} not found")
    text = p.read_text()
    try:
        d = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"config file {str(path)!r} is not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {err}") from None
    if not isinstance(d, dict):
        raise ValueError(f"config file {str(path)!r}: the top level must be an object/table of sections "
                         f"(case, traffic, candidates, ...), got {type(d).__name__} {str(d)[:40]!r}")
    return case_from_dict(d, base_dir=p.parent)


def default_case(**changes) -> Case:
    """The documented default case: the articles' BERT-base service with 40% long texts.

    BERT-base classification at 300 requests/s (about the A100 figure the articles quote,
    280-320 req/s), p99 target 50 ms (ASSUMPTION: a common interactive budget), on one
    GC200 and one A100-80GB (the articles' "IPU of similar price").
    """
    base = dict(model="bert-base", rate_per_s=300.0, slo_p99_s=0.050, long_fraction=0.4,
                candidates=(Candidate("gc200", 1), Candidate("a100-80gb", 1)),
                name="Default: BERT-base classification, 40% long texts, 300 req/s, p99 <= 50 ms")
    base.update(changes)
    return Case(**base)
