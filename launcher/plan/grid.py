"""Grid expansion: lists per dimension -> layouts (product, zipped groups, include / exclude lists).

Pure and fast: the planner expands and checks 10^6 points in a few seconds, so this module builds plain tuples
first and `Layout` objects once per point, with no per-point validation (that is launcher.plan.rules).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from launcher.config.schema import ClusterConfig, GridConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import FACTORS, GRID_DIMENSIONS, NAMES, WORLD, Layout, dimension

Unit = tuple[tuple[str, ...], list[tuple[Any, ...]]]
"""An independent axis of the product: its dimension names and their value tuples."""
# A grid point is the world (gpus, nodes) plus one value per grid dimension; dp may be derived.
_CASTS = {name: dimension(name).type for name in GRID_DIMENSIONS}
_OTHER_FACTORS = tuple(name for name in FACTORS if name != "dp")
"""The model-parallel factors a derived dp divides the world by (every world factor but dp)."""


def world_choices(grid: GridConfig, cluster: ClusterConfig) -> list[tuple[int, int]]:
    """(gpus, nodes) pairs. `nodes` means whole nodes; `gpus` may be a partial node."""
    if grid.nodes is not None and grid.gpus is not None:
        raise ConfigError("grid.gpus", list(grid.gpus), "set either grid.nodes or grid.gpus, not both")
    if grid.gpus is not None:
        per_node = cluster.gpus_per_node
        return [(int(g), max(1, -(-int(g) // per_node))) for g in grid.gpus]
    nodes = grid.nodes if grid.nodes is not None else [cluster.nodes]
    return [(int(n) * cluster.gpus_per_node, int(n)) for n in nodes]


def _dimension_values(grid: GridConfig) -> dict[str, list[Any]]:
    values: dict[str, list[Any]] = {}
    for name in GRID_DIMENSIONS:
        raw = getattr(grid, name)
        if raw is None:  # only dp may be None: derived from the world size
            continue
        items = list(raw)
        if not items:
            raise ConfigError(f"grid.{name}", items, "give at least one value (or remove the key)")
        values[name] = items
    return values


def _units(grid: GridConfig, values: dict[str, list[Any]], worlds: list[tuple[int, int]]) -> list[Unit]:
    """Independent axes of the product: each is (dimension names, list of value tuples)."""
    axes = dict(values)
    axes["world"] = worlds
    zipped: set[str] = set()
    units = []
    for group in grid.zip:
        names = tuple("world" if n in WORLD else n for n in group)
        for n in names:
            if n not in axes:
                raise ConfigError("grid.zip", list(group), f"{n!r} is not a grid dimension with values; "
                                  f"use names from {', '.join(NAMES)}")
            if n in zipped:
                raise ConfigError("grid.zip", list(group), f"{n!r} appears in two zip groups; put it in one")
        lengths = {n: len(axes[n]) for n in names}
        if len(set(lengths.values())) != 1:
            raise ConfigError("grid.zip", list(group), f"zipped dimensions need lists of equal length, got {lengths}")
        zipped.update(names)
        units.append((names, list(zip(*(axes[n] for n in names)))))
    for name, items in axes.items():
        if name not in zipped:
            units.append(((name,), [(v,) for v in items]))
    return units


def _make_layout(point: dict[str, Any]) -> Layout:
    gpus, nodes = point["world"]
    values = {name: _CASTS[name](point[name]) for name in GRID_DIMENSIONS if point.get(name) is not None}
    if "dp" not in values:  # derived: world / model-parallel size; a remainder is left for the "world" rule
        split = 1
        for name in _OTHER_FACTORS:
            split *= values.get(name, 1)
        values["dp"] = gpus // split if split > 0 else 0
    return Layout(gpus=gpus, nodes=nodes, **values)


def _matches(layout: Layout, partial: dict[str, Any]) -> bool:
    return all(getattr(layout, k) == v for k, v in partial.items())


def _check_keys(section: str, entries: Sequence[dict[str, Any]]) -> None:
    valid = set(NAMES)
    for i, entry in enumerate(entries):
        unknown = sorted(set(entry) - valid)
        if unknown:
            raise ConfigError(f"grid.{section}[{i}]", unknown[0], f"not a grid dimension; valid: {', '.join(NAMES)}")


def _include_layout(entry: dict[str, Any], values: dict[str, list[Any]], worlds: list[tuple[int, int]],
                    cluster: ClusterConfig, index: int) -> Layout:
    try:
        return _include_point(entry, values, worlds, cluster)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"grid.include[{index}]", dict(entry), f"values must be numbers/booleans/recompute "
                          f"modes like the grid's lists ({exc})") from None


def _include_point(entry: dict[str, Any], values: dict[str, list[Any]], worlds: list[tuple[int, int]],
                   cluster: ClusterConfig) -> Layout:
    point = {name: items[0] for name, items in values.items()}
    point.update({k: v for k, v in entry.items() if k not in WORLD})
    if "gpus" in entry:
        point["world"] = (int(entry["gpus"]), max(1, -(-int(entry["gpus"]) // cluster.gpus_per_node)))
    elif "nodes" in entry:
        point["world"] = (int(entry["nodes"]) * cluster.gpus_per_node, int(entry["nodes"]))
    else:
        point["world"] = worlds[0]
    return _make_layout(point)


def expand(grid: GridConfig, cluster: ClusterConfig) -> Iterator[Layout]:
    """Every distinct layout of the grid, in product order, then the includes; excludes removed.

    Streams: nothing is kept per point (values are made distinct per dimension up front, so the product has no
    duplicates to remember), and each Layout is built positionally from values converted once."""
    worlds = world_choices(grid, cluster)
    values = _dimension_values(grid)
    _check_keys("include", grid.include)
    _check_keys("exclude", grid.exclude)
    units = _flat_units(_units(grid, values, worlds))
    excludes = [dict(e) for e in grid.exclude]
    includes = [_include_layout(dict(e), values, worlds, cluster, i) for i, e in enumerate(grid.include)]
    build = _builder(units, derive_dp="dp" not in values)
    for combo in itertools.product(*(items for _, items in units)):
        layout = build(combo)
        if excludes and any(_matches(layout, e) for e in excludes):
            continue
        yield layout
    seen: set[Layout] = set()  # the includes only: a handful
    for layout in includes:
        if layout not in seen and not _in_product(layout, units, "dp" not in values, excludes):
            seen.add(layout)
            yield layout




def _flat_units(units: list[Unit]) -> list[Unit]:
    """Units with 'world' split into gpus and nodes, every value converted once (not once per point), and each
    unit's values made distinct (a repeated value would repeat every point it is part of)."""
    flat = []
    for names, items in units:
        fnames: list[str] = []
        for name in names:
            fnames += ["gpus", "nodes"] if name == "world" else [name]
        converted = []
        for item in items:
            vals: list[Any] = []
            for name, value in zip(names, item):
                vals += [int(value[0]), int(value[1])] if name == "world" else [_CASTS[name](value)]
            converted.append(tuple(vals))
        flat.append((tuple(fnames), list(dict.fromkeys(converted))))
    return flat


_SETTERS = tuple(getattr(Layout, f.name).__set__ for f in dataclasses.fields(Layout))


def _layout_of(values: Sequence[Any]) -> Layout:
    """Layout(*values) without the frozen dataclass's __init__ (one object.__setattr__ call per field, 1.4 us):
    the slots' own setters, 1.0 us. For values the grid has converted already; nothing else differs."""
    layout = object.__new__(Layout)
    for set_field, value in zip(_SETTERS, values):
        set_field(layout, value)
    return layout


def _builder(units: list[Unit], derive_dp: bool) -> Callable[[tuple[Any, ...]], Layout]:
    """combo (one value tuple per unit) -> Layout, positionally: ~1 us instead of a dict per point. Layout fields
    that no unit sets take their defaults; dp, when not a dimension, is derived as world / (tp * pp * cp) (a remainder
    is left for the "world" constraint to report)."""
    layout_fields = [f for f in dataclasses.fields(Layout)]
    consts = tuple(f.default for f in layout_fields)  # flat = consts + the units' values, in unit order
    where = {name: len(consts) + i for i, name in enumerate(n for names, _ in units for n in names)}
    index = [where.get(f.name, i) for i, f in enumerate(layout_fields)]
    getter = operator.itemgetter(*index)
    if not derive_dp:
        return lambda combo: _layout_of(getter(sum(combo, consts)))
    at = {f.name: i for i, f in enumerate(layout_fields)}
    dp_at, gpus_at = at["dp"], at["gpus"]
    split_at = [at[name] for name in _OTHER_FACTORS]

    def build(combo: tuple[Any, ...]) -> Layout:
        vals = list(getter(sum(combo, consts)))
        split = 1
        for i in split_at:
            split *= vals[i]
        vals[dp_at] = vals[gpus_at] // split
        return _layout_of(vals)

    return build


def _in_product(layout: Layout, units: list[Unit], derive_dp: bool,
                excludes: Sequence[dict[str, Any]]) -> bool:
    """Would the product have yielded this layout already? (An include that an exclude removed from the product
    is yielded: the include is the explicit wish.)"""
    for names, items in units:
        if tuple(getattr(layout, n) for n in names) not in items:
            return False
    if derive_dp and layout.dp != layout.gpus // math.prod(getattr(layout, n) for n in _OTHER_FACTORS):
        return False
    return not (excludes and any(_matches(layout, e) for e in excludes))


def key_space(grid: GridConfig, cluster: ClusterConfig) -> dict[str, int]:
    """An upper bound of the distinct values each Layout field takes in the grid (a derived dp: the product of the
    world's and the other factors' counts; the includes add one each). For launcher.plan.rules.Checker."""
    units = _flat_units(_units(grid, _dimension_values(grid), world_choices(grid, cluster)))
    counts = {name: len({item[i] for item in items}) for names, items in units for i, name in enumerate(names)}
    if "dp" not in counts:
        counts["dp"] = math.prod(counts.get(name, 1) for name in ("gpus", *_OTHER_FACTORS))
    extra = len(grid.include)
    return {f.name: counts.get(f.name, 1) + extra for f in dataclasses.fields(Layout)}


def grid_size(grid: GridConfig, cluster: ClusterConfig) -> int:
    """Points in the product before de-duplication and exclusion (for reports)."""
    return grid_factors(grid, cluster)[1]


def grid_factors(grid: GridConfig, cluster: ClusterConfig) -> tuple[list[tuple[str, int]], int]:
    """(dimension or zipped group, number of values) per axis of the product, and the grid's size: their product
    plus the includes. Values are counted once each (a repeated value adds no point)."""
    units = _units(grid, _dimension_values(grid), world_choices(grid, cluster))
    factors = [("(" + ",".join(names) + ")" if len(names) > 1 else names[0], len(dict.fromkeys(items)))
               for names, items in units]
    factors = [("nodes" if grid.nodes is not None or grid.gpus is None else "gpus", n) if name == "world"
               else (name, n) for name, n in factors]
    factors.sort(key=lambda f: f[0] not in WORLD)  # the world size first, as people read a grid
    size = 1
    for _, n in factors:
        size *= n
    return factors, size + len(grid.include)
