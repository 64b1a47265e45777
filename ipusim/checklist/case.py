"""The case a checklist is run on: model, traffic, latency target, candidates, prices.

A case is plain data (frozen dataclasses) built in code, from a dict, or from a TOML /
JSON file (``checklist.config_file``: ``case_from_dict``, ``load_case``), so that the same case can be rerun. Every default that is not
sourced is marked ASSUMPTION in ``ASSUMPTIONS`` below and repeated in the report.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .. import hardware, limits, workloads
from .. import lengths as _lengths
from .._validate import choice, finite_array, fraction, lengths_array, positive
from ..prices import DEFAULT_USD_PER_CHIP_HOUR, DEFAULT_USD_PER_KWH, PRICE_ASSUMPTION, Prices  # noqa: F401 (re-exported)

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

ASSUMPTIONS = MappingProxyType(
    {
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
    }
)


@dataclass(frozen=True)
class Candidate:
    """One deployment to evaluate: ``count`` chips of one kind, a padding mode and a policy."""

    chip: hardware.TileChip | hardware.GpuChip
    count: int = 1
    mode: str = "auto"  # "padded", "packed", or "auto" (try both, keep the better)
    policy: str = "auto"  # "static", "dynamic", or "auto" (search)

    def __post_init__(self):
        object.__setattr__(
            self,
            "chip",
            own_name("chip", hardware.chip(self.chip), hardware.PRESETS, hardware.chip),
        )
        object.__setattr__(
            self,
            "count",
            positive(
                "candidate count",
                self.count,
                integer=True,
                at_most=limits.MAX_CHIPS,
                why="chips in one deployment; beyond the largest published systems",
            ),
        )
        choice("candidate mode", self.mode, MODES)
        choice("candidate policy", self.policy, POLICIES)

    @property
    def label(self) -> str:
        return f"{self.chip.name} x{self.count}"

    def to_dict(self) -> dict:
        return {
            "chip": self.chip.name,
            "kind": self.chip.kind,
            "count": self.count,
            "mode": self.mode,
            "policy": self.policy,
        }


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
        positive(
            "training.token_budget",
            self.token_budget,
            at_most=1e16,
            why="tokens; 30,000x GPT-3's budget",
        )
        if self.token_budget < 1:
            raise ValueError(
                f"training.token_budget must be at least 1 token, got {self.token_budget!r}"
            )
        positive("training.seq_len", self.seq_len, integer=True)
        limits.check_sequence_length("training.seq_len", self.seq_len)

    def to_dict(self) -> dict:
        return {
            "models": [m.name for m in self.models],
            "token_budget": self.token_budget,
            "seq_len": self.seq_len,
        }


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
        m = own_name("model", workloads.model(self.model), workloads.MODELS, workloads.model)
        object.__setattr__(self, "model", m)
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, (int, np.integer))
            or self.seed < 0
        ):
            raise ValueError(f"seed must be a non-negative whole number, got {self.seed!r}")
        if self.arrivals is not None:
            if hasattr(self.arrivals, "__len__"):
                limits.check_at_most(
                    "arrivals (requests in the trace)",
                    len(self.arrivals),
                    20_000_000,
                    "requests the serving simulator takes in one run",
                )
            arr = (
                finite_array("arrivals", self.arrivals)
                if not isinstance(self.arrivals, np.ndarray)
                else np.asarray(self.arrivals, dtype=float)
            )
            if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)):
                raise ValueError(
                    "arrival trace must be a 1-D list of at least 2 finite times (seconds)"
                )
            if np.any(np.diff(arr) < 0):
                raise ValueError("arrival trace times must be sorted (non-decreasing)")
            span = float(arr[-1] - arr[0])
            if span <= 0:
                raise ValueError("arrival trace spans zero time: give arrivals spread over time")
            object.__setattr__(self, "arrivals", arr - arr[0])
            object.__setattr__(self, "rate_per_s", (arr.size - 1) / span)
        if (
            isinstance(self.rate_per_s, (int, float))
            and not isinstance(self.rate_per_s, bool)
            and self.rate_per_s == 0
        ):
            raise ValueError(
                "rate_per_s is 0: with zero traffic there is nothing to serve and no cost per request; "
                "give the expected mean arrival rate in requests/s (for a training-only case, set "
                "inference = false)"
            )
        object.__setattr__(
            self,
            "rate_per_s",
            positive(
                "rate_per_s (requests/s)",
                self.rate_per_s,
                at_most=limits.MAX_RATE_PER_S,
                why="the checklist simulates replicas to carry the rate; above this it would need millions",
            ),
        )
        object.__setattr__(
            self,
            "slo_p99_s",
            positive(
                "slo_p99_s (seconds)",
                self.slo_p99_s,
                at_most=limits.MAX_SECONDS,
                why="a latency target",
            ),
        )
        task = choice("task", self.task, TASKS)
        if task == "auto":
            task = "classify" if m.kind == "encoder" else "generate"
        if task == "generate" and m.kind == "encoder":
            raise ValueError(f"task 'generate' needs a decoder model; {m.name} is an encoder")
        object.__setattr__(self, "task", task)
        object.__setattr__(
            self, "output_tokens", positive("output_tokens", self.output_tokens, integer=True)
        )
        if task == "generate" and self.output_tokens >= m.max_positions:
            raise ValueError(
                f"output_tokens = {self.output_tokens:,} leaves no room for a prompt in "
                f"{m.name}'s {m.max_positions:,} positions"
            )
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
        cands = tuple(
            c if isinstance(c, Candidate) else parse_candidate(c) for c in self.candidates
        )
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
            object.__setattr__(
                self,
                "name",
                f"{m.name} {task}, {self.rate_per_s:g} req/s, p99 <= {self.slo_p99_s * 1e3:g} ms",
            )

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
            lens = {
                "source": self.length_source or "given",
                "n": int(self.lengths.size),
                "mean": float(self.lengths.mean()),
                "max": int(self.lengths.max()),
            }
        else:
            lens = {"long_fraction": self.long_fraction}
        return {
            "name": self.name,
            "model": self.model.name,
            "task": self.task,
            "rate_per_s": self.rate_per_s,
            "arrivals": "trace" if self.arrivals is not None else "poisson",
            "slo_p99_s": self.slo_p99_s,
            "lengths": lens,
            "output_tokens": self.output_tokens if self.task == "generate" else None,
            "candidates": [c.to_dict() for c in self.candidates],
            "prices": {
                "usd_per_chip_hour": dict(self.prices.usd_per_chip_hour),
                "usd_per_kwh": self.prices.usd_per_kwh,
                "user_set": list(self.prices.user_set),
            },
            "training": self.training.to_dict() if self.training else None,
            "inference": self.inference,
            "answers": dict(self.answers),
            "seed": self.seed,
        }


def histogram_sample(hist: dict, n: int = 20_000, seed: int = 0) -> np.ndarray:
    """A seeded sample of ``n`` lengths from a ``{length: count}`` histogram (``lengths.Histogram.sample``)."""
    try:
        ls = [int(k) for k in hist]
        if any(
            k > limits.MAX_SEQUENCE_TOKENS for k in ls
        ):  # as Python ints: before int64 could overflow
            big = max(ls)
            raise ValueError(
                f"length histogram key {big:.3g} is over the limit of {limits.MAX_SEQUENCE_TOKENS:,} "
                "tokens per sequence"
            )
        ls = np.array(ls, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as err:
        if "over the limit" in str(err):
            raise
        raise ValueError(
            f"length histogram keys must be whole token lengths, got {list(hist)[:3]!r}"
        ) from None
    if ls.size == 0 or ls.min() < 1:
        raise ValueError("length histogram needs lengths >= 1")
    counts = np.zeros(int(ls.max()), dtype=float)
    np.add.at(counts, ls - 1, np.array([float(v) for v in hist.values()]))
    return _lengths.Histogram(counts).sample(n, seed=seed)


def read_lengths_file(path, seed: int = 0) -> np.ndarray:
    """Lengths from a file (``lengths.load_file``): a ``length,count`` CSV is sampled (20,000
    seeded draws), lengths one a line are taken as they are."""
    got = _lengths.load_file(path)
    return got.sample(20_000, seed=seed) if isinstance(got, _lengths.Histogram) else got


_DESCRIPTIVE = (
    "name",
    "source",
    "sources",
    "notes",
    "published_params",
)  # say where numbers come from; change no result


def own_name(what: str, obj, presets, preset):
    """``obj`` (a chip or a model) unless it carries a preset's name (any case) without being
    that preset: such a chip or model would be reported, priced and calibrated as the preset,
    so it is refused, naming the fields that differ. A changed copy of a preset is named like
    ``gc200*`` (as ``ipusim.sweep`` names them; a config's ``base =`` chip is named so)."""
    key = str(obj.name).lower()
    if key not in presets:
        return obj
    p = preset(key)
    if type(obj) is not type(p):
        diff = f"it is a {getattr(obj, 'kind', type(obj).__name__)} {what}, the preset a {getattr(p, 'kind', '')} one"
    else:
        fields = [
            f.name
            for f in dataclasses.fields(obj)
            if f.compare
            and f.name not in _DESCRIPTIVE
            and getattr(obj, f.name) != getattr(p, f.name)
        ]
        if not fields:  # the preset itself, written out: the preset (with its sources)
            return p
        diff = f"it differs in {', '.join(fields)}"
    raise ValueError(
        f"{what} name {obj.name!r} is the name of a preset {what}, but {diff}; give it a name of "
        f"its own (a changed copy of a preset is named like {key + '*'!r})"
    )


def _chip_from(spec):
    if isinstance(spec, (str, hardware.TileChip, hardware.GpuChip)):
        return hardware.chip(spec)
    if isinstance(spec, dict):
        d = dict(spec)
        kind = d.pop("kind", None)
        base = d.pop("base", None)
        if base is not None:
            try:
                c = hardware.chip(base)
                if (
                    "name" not in d and c.replace(**d) != c
                ):  # a changed preset: visibly not the preset
                    d["name"] = c.name + "*"
                return c.replace(**d)
            except TypeError as err:
                raise ValueError(f"custom chip based on {base!r}: {err}") from None
        cls = {"tile": hardware.TileChip, "gpu": hardware.GpuChip}.get(kind)
        if cls is None:
            raise ValueError(
                "a custom chip needs kind = 'tile' or 'gpu' (or base = a preset name to modify)"
            )
        try:
            return cls(**d)
        except TypeError as err:
            raise ValueError(f"custom chip: {err}") from None
    raise ValueError(f"chip must be a preset name or a table of fields, got {spec!r}")


def parse_candidate(spec) -> Candidate:
    if isinstance(spec, str):
        return parse_candidates(spec)[0]
    if isinstance(spec, dict):
        d = dict(spec)
        unknown = set(d) - {"chip", "count", "mode", "policy"}
        if unknown:
            raise ValueError(
                f"unknown candidate field(s) {sorted(unknown)}; valid: chip, count, mode, policy"
            )
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
        if not k.strip():
            raise ValueError(
                f"price {it!r}: the chip name before '=' is empty; use CHIP=USD_PER_CHIP_HOUR"
            )
        try:
            out[k.strip().lower()] = float(v)
        except ValueError:
            raise ValueError(f"price {it!r}: {v!r} is not a number") from None
    return out


def default_case(**changes) -> Case:
    """The documented default case: the articles' BERT-base service with 40% long texts.

    BERT-base classification at 300 requests/s (about the A100 figure the articles quote,
    280-320 req/s), p99 target 50 ms (ASSUMPTION: a common interactive budget), on one
    GC200 and one A100-80GB (the articles' "IPU of similar price").
    """
    base = dict(
        model="bert-base",
        rate_per_s=300.0,
        slo_p99_s=0.050,
        long_fraction=0.4,
        candidates=(Candidate("gc200", 1), Candidate("a100-80gb", 1)),
        name="Default: BERT-base classification, 40% long texts, 300 req/s, p99 <= 50 ms",
    )
    base.update(changes)
    return Case(**base)
