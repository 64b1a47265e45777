"""Chip-to-chip links and the time of collectives over them (the alpha-beta model).

A collective over ``p`` chips moving ``n`` bytes costs latency terms ``alpha`` (seconds per
message step) plus bandwidth terms ``n / beta`` (``beta``: bytes/s one way per chip), with
the step counts of the standard algorithms (THAKUR2005: Thakur, Rabenseifner and Gropp,
"Optimization of Collective Communication Operations in MPICH"):

====================  ==========================================  ====================
collective            bandwidth term                              latency term
====================  ==========================================  ====================
ring all-reduce       ``2 (p-1)/p * n / beta``                    ``2 (p-1) alpha``
ring reduce-scatter   ``(p-1)/p * n / beta``                      ``(p-1) alpha``
ring all-gather       ``(p-1)/p * n / beta``                      ``(p-1) alpha``
tree all-reduce       ``2 n / beta`` (pipelined reduce + bcast)   ``2 ceil(log2 p) alpha``
point-to-point        ``n / beta``                                ``alpha``
====================  ==========================================  ====================

``n`` is always the size of the whole tensor on one chip before (all-reduce,
reduce-scatter) or after (all-gather) the collective, in bytes. Everything is SI:
bytes, seconds, bytes/s. ``p = 1`` costs 0.

A ``Fabric`` is a two-level hierarchy: nodes of ``chips_per_node`` chips joined by a fast
intra-node link (IPU-Links across an IPU-POD64, NVLink in a DGX), and nodes joined by a slower
inter-node link (GW-Links between pods, InfiniBand between DGXs). Link figures carry their source keys
(``docs/sources.md``); link vendors quote both directions summed, so one way is half.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

from ._validate import positive

# --------------------------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """A chip's connection to its peers at one level of the hierarchy.

    ``bandwidth_bytes_per_s`` is what one chip can send one way to its ring neighbour
    (the ``beta`` of the alpha-beta model); ``latency_s`` is the time of one message step
    (``alpha``).
    """

    name: str
    bandwidth_bytes_per_s: float  # bytes/s, one way, per chip
    latency_s: float  # s per message step
    source: str = field(default="", compare=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Link.name must be a non-empty string, got {self.name!r}")
        positive(f"Link.bandwidth_bytes_per_s ({self.name})", self.bandwidth_bytes_per_s)
        positive(f"Link.latency_s ({self.name})", self.latency_s, allow_zero=True)

    def __repr__(self):
        return (
            f"Link({self.name!r}: {self.bandwidth_bytes_per_s / 1e9:,.1f} GB/s one way per chip, "
            f"{self.latency_s * 1e6:.2f} us)"
        )


# IPU-Link latency: JIA-FT measured 0.52-0.78 us off-chip on GC2 (facts §1.5); the middle of the
# range is used, and (ASSUMPTION) applied to GC200/Bow links, for which no latency was found.
IPU_LINK_LATENCY_S = 0.65e-6  # s, JIA-FT (facts §1.5), mid-range
# JIA-FT measured 55.0 GB/s one way between the two GC2 IPUs of a C2 card (facts §1.5) over
# links rated 3 x 64 GB/s both ways, 96 GB/s one way (JIA-N): the links carry 55 / 96 = 57% of
# their nominal rate. That measured share is applied to every tile chip's nominal link rate
# (ASSUMPTION for GC200 and Bow, whose links were not measured).
IPU_LINK_GC2_MEASURED_BYTES_PER_S = 55.0e9  # bytes/s one way, JIA-FT (facts §1.5)
IPU_LINK_GC2_NOMINAL_BYTES_PER_S = (
    3 * 64e9 / 2
)  # bytes/s one way, JIA-N: 3 links x 64 GB/s both ways
IPU_LINK_EFFICIENCY = IPU_LINK_GC2_MEASURED_BYTES_PER_S / IPU_LINK_GC2_NOMINAL_BYTES_PER_S
# NVLink carries packet headers beside the data: NCCL's topology code takes an NVLink of an
# sm80 GPU (A100) as 20.0 GB/s and of an sm90 GPU (H100, H200) as 20.6 GB/s one way per link
# against the 25 GB/s each way of the link's signalling (NCCL-TOPO: ``SM80_NVLINK_BW`` and
# ``SM90_NVLINK_BW`` in ``src/graph/topo.h``; its maintainer: "the app-level bandwidth is
# [roughly] 80% of the peak bandwidth", NVIDIA/nccl issue 1054). ipusim's NVLink carries that
# share of the chip's nominal rate, as its IPU-Links carry JIA-FT's measured 55/96. A user-made
# GPU takes the sm80 share (ASSUMPTION).
# Nominal: 600 GB/s both ways over an A100's 12 links, 900 over an H100's 18 (facts §2;
# NVLINK-LINKS for the link counts): 25 GB/s each way per link on both.
NVLINK_NOMINAL_BYTES_PER_S_PER_LINK = 25e9  # bytes/s one way per link (NVLINK-LINKS)
NVLINK_NCCL_BYTES_PER_S_PER_LINK = {
    "a100-40gb": 20.0e9,  # NCCL-TOPO SM80_NVLINK_BW
    "a100-80gb": 20.0e9,  # NCCL-TOPO SM80_NVLINK_BW
    "h100-sxm": 20.6e9,  # NCCL-TOPO SM90_NVLINK_BW
    "h200": 20.6e9,  # NCCL-TOPO SM90_NVLINK_BW
}


def nvlink_efficiency(chip) -> float:
    """Share of its nominal NVLink rate a GPU's collectives get (NCCL-TOPO, see above)."""
    from .hardware import chip as _chip

    per_link = NVLINK_NCCL_BYTES_PER_S_PER_LINK.get(_system_key(_chip(chip)), 20.0e9)
    return per_link / NVLINK_NOMINAL_BYTES_PER_S_PER_LINK


# ASSUMPTION: NVLink step latency 1 us and InfiniBand 2 us (NIC + one switch hop); no sourced
# figure in the facts sheet. They are of the order NCCL's small-message times show and matter only
# for small messages (decode-sized all-reduces), where the tree/ring crossover depends on them.
NVLINK_LATENCY_S = 1.0e-6  # s, ASSUMPTION
INFINIBAND_LATENCY_S = 2.0e-6  # s, ASSUMPTION
# ASSUMPTION: a GW-Link (RoCE through the IPU-Gateway) takes 2 us per step, as InfiniBand; no
# figure found.
GATEWAY_LATENCY_S = 2.0e-6  # s, ASSUMPTION
# An IPU-POD64 (16 IPU-M2000s or Bow-2000s, 64 chips) is joined by IPU-Links within and between
# its machines; pods are joined by GW-Links, 2 x 100 Gb/s per machine of 4 chips (GC-POD64:
# IPU-Links "interconnect IPUs within and between IPU-M2000 units", GW-Links over 100 GbE "for
# rack-to-rack connectivity"; GC-BOW2000: "GW-Link - 2x 100Gbps Gateway-Links for communication
# between Bow Pods"). Ethernet is full duplex: 100 Gb/s each way per link.
POD_CHIPS = 64  # chips on IPU-Links (GC-POD64)
GW_LINK_BYTES_PER_S_PER_MACHINE = 2 * 100e9 / 8  # bytes/s one way per 4-chip machine (GC-BOW2000)

# Inter-node links per chip preset: (bandwidth one way per node in bytes/s, chips per node, latency,
# source). Per chip = per node / chips per node (all chips of a node cross at once in the
# hierarchical all-reduce).
_INTER_NODE = {
    "gc200": (
        GW_LINK_BYTES_PER_S_PER_MACHINE * POD_CHIPS / 4,
        POD_CHIPS,
        GATEWAY_LATENCY_S,
        "GC-POD64: IPU-POD64s joined by GW-Links, 2 x 100 Gb/s per IPU-M2000 (4 chips)",
    ),
    "bow": (
        GW_LINK_BYTES_PER_S_PER_MACHINE * POD_CHIPS / 4,
        POD_CHIPS,
        GATEWAY_LATENCY_S,
        "GC-BOW2000: Bow Pod64s joined by GW-Links, 2 x 100 Gb/s per Bow-2000 (4 chips)",
    ),
    # GC-LEGACY (facts §1.1): 128 GB/s card-to-card on the C2 card (2 IPUs), both directions.
    "gc2": (
        128e9 / 2,
        2,
        IPU_LINK_LATENCY_S,
        "GC-LEGACY: 128 GB/s card-to-card per C2 card (2 chips), both directions",
    ),
    # DGX-A100 (GEEKTOPIA-DGXA100): eight 200 Gb/s Mellanox adapters per 8-GPU node (HDR InfiniBand).
    "a100-40gb": (
        8 * 200e9 / 8,
        8,
        INFINIBAND_LATENCY_S,
        "GEEKTOPIA-DGXA100: 8 x 200 Gb/s per DGX A100",
    ),
    "a100-80gb": (
        8 * 200e9 / 8,
        8,
        INFINIBAND_LATENCY_S,
        "GEEKTOPIA-DGXA100: 8 x 200 Gb/s per DGX A100",
    ),
    # DGX H100/H200 (DGX-BASEPOD): eight single-port ConnectX-7, up to 400 Gb/s (NDR) each.
    "h100-sxm": (
        8 * 400e9 / 8,
        8,
        INFINIBAND_LATENCY_S,
        "DGX-BASEPOD: 8 x ConnectX-7 400 Gb/s per DGX H100",
    ),
    "h200": (
        8 * 400e9 / 8,
        8,
        INFINIBAND_LATENCY_S,
        "DGX-BASEPOD: 8 x ConnectX-7 400 Gb/s per DGX H200",
    ),
}
# Default node size for a user-made chip: a pod of 64 tile chips (an IPU-POD64) or 8 GPUs (a DGX).
_DEFAULT_NODE = {"tile": POD_CHIPS, "gpu": 8}


def intra_node_link(chip) -> Link:
    """The fast link between chips of one node: IPU-Links or NVLink, one way = half the chip's
    ``link_bandwidth_bytes_per_s`` (CBLAKE 320 GB/s per GC200 over 10 IPU-Links, facts §1.1;
    THUNDER/HPCTECH NVLink 600/900 GB/s per A100/H100, facts §2; all both directions summed: JIA-N
    for the IPU-Links, HGX-A100-BLOG "bi-directional speed of 600 GB/s" for NVLink), times the
    share the link carries: for IPU-Links the measured ``IPU_LINK_EFFICIENCY`` (JIA-FT), for
    NVLink NCCL's per-link rate over the nominal one (``nvlink_efficiency``, NCCL-TOPO)."""
    from .hardware import chip as _chip

    c = _chip(chip)
    if c.link_bandwidth_bytes_per_s <= 0:
        raise ValueError(
            f"chip {c.name!r} has no chip-to-chip link (link_bandwidth_bytes_per_s = 0)"
        )
    tile = c.kind == "tile"
    return Link(
        "ipu-link" if tile else "nvlink",
        c.link_bandwidth_bytes_per_s / 2 * (IPU_LINK_EFFICIENCY if tile else nvlink_efficiency(c)),
        IPU_LINK_LATENCY_S if tile else NVLINK_LATENCY_S,
        source=c.sources.get("link_bandwidth_bytes_per_s", "(user value)")
        + "; one way = half"
        + (
            "; x 55/96 as measured (JIA-FT)"
            if tile
            else f"; x {nvlink_efficiency(c):.3f}, NCCL's per-link rate (NCCL-TOPO)"
        ),
    )


def _system_key(c) -> str:
    """The preset whose node and inter-node fabric chip ``c`` sits in: its own name, or for a
    changed copy of a preset (named ``"gc200*"``, as ``ipusim.sweep`` names them) the preset's.
    The node and the fabric between nodes (IPU-Gateway, InfiniBand NICs) belong to the system
    around the chip, not to the chip fields a sweep changes, so a changed copy keeps them and a
    sweep over ``link_bandwidth_bytes_per_s`` changes the chip-to-chip links only."""
    base = c.name[:-1] if c.name.endswith("*") else c.name
    return base if base in _INTER_NODE else c.name


def inter_node_link(chip, chips_per_node: int | None = None) -> Link:
    """The link between nodes, per chip (the node's fabric bandwidth shared by its chips)."""
    from .hardware import chip as _chip

    c = _chip(chip)
    key = _system_key(c)
    if key in _INTER_NODE:
        node_bw, node, lat, src = _INTER_NODE[key]
    else:  # a user-made chip: ASSUMPTION, a quarter of its own link, stated in the source
        node, lat = (
            _DEFAULT_NODE[c.kind],
            (GATEWAY_LATENCY_S if c.kind == "tile" else INFINIBAND_LATENCY_S),
        )
        node_bw = c.link_bandwidth_bytes_per_s / 2 / 4 * node
        src = "ASSUMPTION: user-made chip; inter-node bandwidth a quarter of its one-way chip link"
    node = chips_per_node or node
    return Link("gateway" if c.kind == "tile" else "infiniband", node_bw / node, lat, source=src)


# --------------------------------------------------------------------------------------------
# Collectives on one level (a flat group of p chips on one kind of link)
# --------------------------------------------------------------------------------------------


def _args(nbytes, p, link: Link):
    n = positive("nbytes", nbytes, allow_zero=True)
    p = positive("p (chips in the group)", p, integer=True)
    if not isinstance(link, Link):
        raise ValueError(f"link must be a collectives.Link, got {type(link).__name__}")
    return n, p, link.bandwidth_bytes_per_s, link.latency_s


def ring_all_reduce_s(nbytes: float, p: int, link: Link) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` (per chip) over ``p`` chips:
    ``2 (p-1)/p * n / beta + 2 (p-1) alpha``."""
    n, p, bw, a = _args(nbytes, p, link)
    return 0.0 if p == 1 else 2 * (p - 1) / p * n / bw + 2 * (p - 1) * a


def reduce_scatter_s(nbytes: float, p: int, link: Link) -> float:
    """Seconds for a ring reduce-scatter of ``nbytes`` (the whole tensor on each chip) over
    ``p`` chips, each ending with ``n/p`` reduced bytes: ``(p-1)/p * n / beta + (p-1) alpha``."""
    n, p, bw, a = _args(nbytes, p, link)
    return 0.0 if p == 1 else (p - 1) / p * n / bw + (p - 1) * a


def all_gather_s(nbytes: float, p: int, link: Link) -> float:
    """Seconds for a ring all-gather that leaves ``nbytes`` (the whole tensor) on each of ``p``
    chips, each contributing ``n/p``: ``(p-1)/p * n / beta + (p-1) alpha``."""
    n, p, bw, a = _args(nbytes, p, link)
    return 0.0 if p == 1 else (p - 1) / p * n / bw + (p - 1) * a


def tree_all_reduce_s(nbytes: float, p: int, link: Link) -> float:
    """Seconds for a pipelined binary-tree all-reduce (reduce to the root, then broadcast):
    ``2 n / beta + 2 ceil(log2 p) alpha``. Fewer latency steps than the ring, twice the
    bandwidth term at large ``p``: the tree wins for small messages (see ``ring_tree_crossover_bytes``)."""
    n, p, bw, a = _args(nbytes, p, link)
    return 0.0 if p == 1 else 2 * n / bw + 2 * math.ceil(math.log2(p)) * a


def point_to_point_s(nbytes: float, link: Link) -> float:
    """Seconds to send ``nbytes`` from one chip to another: ``n / beta + alpha`` (0 bytes: 0 s)."""
    n, _, bw, a = _args(nbytes, 1, link)
    return 0.0 if n == 0 else n / bw + a


def all_reduce_s(nbytes: float, p: int, link: Link) -> float:
    """Seconds for the faster of the ring and the tree all-reduce (as NCCL picks by size)."""
    return min(ring_all_reduce_s(nbytes, p, link), tree_all_reduce_s(nbytes, p, link))


def ring_tree_crossover_bytes(p: int, link: Link) -> float:
    """Message size (bytes) below which the tree all-reduce beats the ring, from equating the two
    closed forms: ``n* = p (p - 1 - ceil(log2 p)) alpha beta`` (0 when the ring always wins)."""
    _, p, bw, a = _args(0, p, link)
    if p == 1:
        return 0.0
    return max(0.0, p * (p - 1 - math.ceil(math.log2(p))) * a * bw)


def hierarchical_all_reduce_s(
    nbytes: float, per_node: int, nodes: int, intra: Link, inter: Link
) -> float:
    """Seconds for an all-reduce over ``per_node x nodes`` chips in three phases: reduce-scatter
    inside each node (``per_node`` chips on ``intra``), an all-reduce of the ``n / per_node``
    shard across ``nodes`` (every chip at once on its share ``inter`` of the node's fabric), and
    an all-gather inside each node. With one node it is a ring all-reduce on ``intra``;
    with one chip per node, an all-reduce on ``inter``."""
    n = positive("nbytes", nbytes, allow_zero=True)
    g = positive("per_node", per_node, integer=True)
    m = positive("nodes", nodes, integer=True)
    return reduce_scatter_s(n, g, intra) + all_reduce_s(n / g, m, inter) + all_gather_s(n, g, intra)


# --------------------------------------------------------------------------------------------
# Bytes over the links (for their energy): totals over every chip of the group
# --------------------------------------------------------------------------------------------
#
# The bytes a collective puts on the links, summed over the ``p`` chips of the group, do not
# depend on the algorithm: a ring all-reduce sends ``2 (p-1)/p n`` per chip, a tree all-reduce
# sends ``n`` up and ``n`` down every one of its ``p - 1`` edges, and the hierarchical one sends
# ``2 (g-1) n`` in each of its ``m`` nodes plus ``2 (m-1) n`` across them (``p = g m``): each is
# ``2 (p-1) n``. Likewise an all-gather (ring, or across nodes then inside them) moves ``(p-1) n``.


def all_reduce_bytes(nbytes: float, p: int) -> float:
    """Bytes an all-reduce of ``nbytes`` (per chip) over ``p`` chips sends over the links, summed
    over the chips: ``2 (p-1) n`` (ring, tree and hierarchical alike)."""
    n = positive("nbytes", nbytes, allow_zero=True)
    p = positive("p (chips in the group)", p, integer=True)
    return 2.0 * (p - 1) * n


def all_gather_bytes(nbytes: float, p: int) -> float:
    """Bytes an all-gather leaving ``nbytes`` (the whole tensor) on each of ``p`` chips sends over
    the links, summed over the chips: ``(p-1) n``."""
    n = positive("nbytes", nbytes, allow_zero=True)
    p = positive("p (chips in the group)", p, integer=True)
    return float((p - 1) * n)


# --------------------------------------------------------------------------------------------
# A fabric: chips grouped into nodes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fabric:
    """``chips`` chips of one kind in nodes of ``chips_per_node``, an ``intra`` link inside a
    node and an ``inter`` link (per chip) between nodes.

    Groups are laid out node-first: a group of ``p <= chips_per_node`` chips sits in one node,
    a larger group spans ``ceil(p / chips_per_node)`` whole nodes.
    """

    chip: str
    chips: int
    chips_per_node: int
    intra: Link
    inter: Link
    sources: MappingProxyType = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        positive("Fabric.chips", self.chips, integer=True)
        positive("Fabric.chips_per_node", self.chips_per_node, integer=True)
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def nodes(self) -> int:
        """Nodes the chips occupy (the last may be partly filled)."""
        return math.ceil(self.chips / self.chips_per_node)

    def _group(self, p: int) -> tuple[int, int]:
        p = positive("p (chips in the group)", p, integer=True)
        if p > self.chips:
            raise ValueError(f"a group of {p} chips does not fit a fabric of {self.chips} chips")
        if p <= self.chips_per_node:
            return p, 1
        if p % self.chips_per_node:
            raise ValueError(
                f"a group of {p} chips spanning nodes must fill whole nodes of "
                f"{self.chips_per_node} chips"
            )
        return self.chips_per_node, p // self.chips_per_node

    def all_reduce_s(self, nbytes: float, p: int) -> float:
        """Seconds to all-reduce ``nbytes`` over a group of ``p`` chips (hierarchical when it spans nodes)."""
        g, m = self._group(p)
        if m == 1:
            return all_reduce_s(nbytes, g, self.intra)
        return hierarchical_all_reduce_s(nbytes, g, m, self.intra, self.inter)

    def all_gather_s(self, nbytes: float, p: int) -> float:
        """Seconds to all-gather a tensor of ``nbytes`` (whole size) over ``p`` chips: in-node ring,
        or across nodes (each node's share over ``inter``) then inside the node."""
        g, m = self._group(p)
        if m == 1:
            return all_gather_s(nbytes, g, self.intra)
        return all_gather_s(nbytes / g, m, self.inter) + all_gather_s(nbytes, g, self.intra)

    def point_to_point_s(self, nbytes: float, *, cross_node: bool) -> float:
        """Seconds to send ``nbytes`` to one peer, in the same node or across nodes."""
        return point_to_point_s(nbytes, self.inter if cross_node else self.intra)

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "chips": self.chips,
            "chips_per_node": self.chips_per_node,
            "intra": {
                "name": self.intra.name,
                "bandwidth_bytes_per_s": self.intra.bandwidth_bytes_per_s,
                "latency_s": self.intra.latency_s,
                "source": self.intra.source,
            },
            "inter": {
                "name": self.inter.name,
                "bandwidth_bytes_per_s": self.inter.bandwidth_bytes_per_s,
                "latency_s": self.inter.latency_s,
                "source": self.inter.source,
            },
        }

    def __repr__(self):
        return (
            f"Fabric({self.chip}: {self.chips} chips, {self.chips_per_node} per node; "
            f"intra {self.intra!r}; inter {self.inter!r})"
        )


def fabric(chip, chips: int, *, chips_per_node: int | None = None) -> Fabric:
    """The fabric of ``chips`` chips of a preset (or a chip object): IPU-POD64s of 64 GC200 or Bow
    chips on IPU-Links joined by GW-Links; DGX nodes of 8 GPUs on NVLink joined by
    InfiniBand. ``chips_per_node`` overrides the node size (for example a whole IPU-POD on
    IPU-Links)."""
    from .hardware import chip as _chip

    c = _chip(chip)
    chips = positive("chips", chips, integer=True)
    if chips_per_node is not None:
        chips_per_node = positive("chips_per_node", chips_per_node, integer=True)
    intra = intra_node_link(c) if c.link_bandwidth_bytes_per_s > 0 else None
    inter = inter_node_link(c, chips_per_node)
    node = chips_per_node or _INTER_NODE.get(_system_key(c), (0, _DEFAULT_NODE[c.kind]))[1]
    if intra is None:
        if chips > 1:
            raise ValueError(
                f"chip {c.name!r} has no chip-to-chip link; it cannot be used in a group of {chips}"
            )
        intra = Link("none", 1.0, 0.0, source="single chip")
    return Fabric(c.name, chips, node, intra, inter)
