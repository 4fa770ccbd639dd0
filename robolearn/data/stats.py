"""Feature statistics as LeRobot computes them (``lerobot.datasets.compute_stats``), and checks of them.

Per episode, a numeric feature gets min, max, mean, std, count (frames) and the quantiles
q01..q99 over its frames; a camera gets the same per channel, in [0, 1], shaped (3, 1, 1), over a
sample of its frames (``count`` is the number of frames sampled, never pixels). Quantiles are read
from a 5,000-bin histogram and std from the mean of squares, as LeRobot's ``RunningQuantileStats``
does, so our numbers and LeRobot's agree. Datasets aggregate episodes by count: weighted mean,
the parallel-variance formula for std, elementwise min and max, count-weighted quantiles, counts
summed. LeRobot normalizes with ``meta/stats.json``, so :func:`stats_problems` checks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robolearn.data.format import NOT_NUMERIC, QUANTILES, Array

HISTOGRAM_BINS = 5000
"""Bins of the histogram quantiles are read from (LeRobot's ``num_quantile_bins``)."""
MIN_IMAGE_SAMPLES, MAX_IMAGE_SAMPLES, IMAGE_SAMPLE_POWER = 100, 10_000, 0.75
"""Frames sampled per episode for image statistics: n**0.75 within [100, 10,000] (at most n)."""
DOWNSAMPLE_FROM, DOWNSAMPLE_TO = 300, 150
"""Images with a side of 300 pixels or more are strided down to about 150 for statistics."""
BASIC = ("min", "max", "mean", "std", "count")
QUANTILE_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)

Stats = dict[str, Array]


def _histogram_quantile(column: Array, lo: float, hi: float, q: float) -> float:
    """Quantile ``q`` of one column read from its histogram, interpolating inside the bin."""
    edges = np.linspace(lo - 1e-10, hi + 1e-10, HISTOGRAM_BINS + 1)
    cumsum = np.cumsum(np.histogram(column, bins=edges)[0])
    target = q * len(column)
    i = int(np.searchsorted(cumsum, target))
    if i == 0:
        return float(edges[0])
    if i >= len(cumsum):
        return float(edges[-1])
    before, inside = float(cumsum[i - 1]), float(cumsum[i] - cumsum[i - 1])
    if inside == 0:
        return float(edges[i])
    return float(edges[i] + (target - before) / inside * (edges[i + 1] - edges[i]))


def _rows_stats(x: Array, count: int) -> Stats:
    """Statistics of a (rows, d) array over its rows; ``count`` is what they represent (frames)."""
    if len(x) < 2:  # too few rows for a histogram: the quantiles are the mean
        mean = x.mean(axis=0)
        stats = {"min": x.min(axis=0), "max": x.max(axis=0), "mean": mean, "std": x.std(axis=0)}
        stats |= {k: mean.copy() for k in QUANTILE_KEYS}
    else:
        mean = x.mean(axis=0)
        lo, hi = x.min(axis=0), x.max(axis=0)
        variance = (x**2).mean(axis=0) - mean**2
        stats = {"min": lo, "max": hi, "mean": mean, "std": np.sqrt(np.maximum(variance, 0.0))}
        for key, q in zip(QUANTILE_KEYS, QUANTILES, strict=True):
            stats[key] = np.array([_histogram_quantile(x[:, j], lo[j], hi[j], q) for j in range(x.shape[1])])
    return stats | {"count": np.array([count])}


def feature_stats(values: Array) -> Stats:
    """One numeric feature's statistics over an episode's frames (axis 0); shape (1,) stays (1,)."""
    x = np.asarray(values, np.float64)
    x = x[:, None] if x.ndim == 1 else x.reshape(len(x), -1)
    return _rows_stats(x, len(x))


def image_sample(length: int) -> Array:
    """Indices of the frames LeRobot samples from an episode of ``length`` frames."""
    low = min(MIN_IMAGE_SAMPLES, length)
    n = max(low, min(int(length**IMAGE_SAMPLE_POWER), MAX_IMAGE_SAMPLES))
    return np.round(np.linspace(0, length - 1, n)).astype(int)


def image_stats(frames: Array) -> Stats:
    """Per-channel statistics in [0, 1] of (n, H, W, C) uint8 frames, shaped (C, 1, 1)."""
    sample = np.asarray(frames)[image_sample(len(frames))]
    h, w = sample.shape[1:3]
    if max(h, w) >= DOWNSAMPLE_FROM:
        step = int(w / DOWNSAMPLE_TO) if w > h else int(h / DOWNSAMPLE_TO)
        sample = sample[:, ::step, ::step]
    pixels = sample.reshape(-1, sample.shape[-1]).astype(np.float64)
    stats = _rows_stats(pixels, len(sample))
    return {k: v if k == "count" else (v / 255.0).reshape(-1, 1, 1) for k, v in stats.items()}


def aggregate_stats(per_episode: Sequence[Mapping[str, Mapping[str, Array]]]) -> dict[str, Stats]:
    """Dataset statistics from episode statistics, weighted by each episode's count."""
    out: dict[str, Stats] = {}
    keys = dict.fromkeys(k for ep in per_episode for k in ep)
    for key in keys:
        parts = [ep[key] for ep in per_episode if key in ep]
        counts = np.array([float(np.asarray(p["count"]).reshape(-1)[0]) for p in parts])
        total = counts.sum()
        means = np.stack([np.asarray(p["mean"], np.float64) for p in parts])
        w = counts.reshape(-1, *([1] * (means.ndim - 1)))
        mean = (w * means).sum(axis=0) / total
        variances = np.stack([np.asarray(p["std"], np.float64) for p in parts]) ** 2
        variance = (w * (variances + (means - mean) ** 2)).sum(axis=0) / total
        agg = {
            "min": np.min(np.stack([np.asarray(p["min"]) for p in parts]), axis=0),
            "max": np.max(np.stack([np.asarray(p["max"]) for p in parts]), axis=0),
            "mean": mean,
            "std": np.sqrt(variance),
            "count": np.array([int(total)]),
        }
        for q in [k for k in parts[0] if k.startswith("q") and k[1:].isdigit()]:
            if all(q in p for p in parts):
                agg[q] = (w * np.stack([np.asarray(p[q], np.float64) for p in parts])).sum(axis=0) / total
        out[key] = agg
    return out


def stats_from_row(row: Mapping[str, Any]) -> dict[str, Stats]:
    """An episodes-table row's ``stats/<feature>/<stat>`` columns as nested arrays."""
    stats: dict[str, Stats] = {}
    for col, value in row.items():
        if col.startswith("stats/") and value is not None and col.count("/") >= 2:
            feature, stat = col[len("stats/") :].rsplit("/", 1)
            stats.setdefault(feature, {})[stat] = np.asarray(value)
    return stats


def jsonable(stats: Mapping[str, Mapping[str, Array]]) -> dict[str, dict[str, Any]]:
    return {k: {s: np.asarray(v).tolist() for s, v in d.items()} for k, d in stats.items()}


def _close(a: Array, b: Array, scale: float) -> bool:
    """Equal up to float32 storage and summation order (relative to the feature's magnitude)."""
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-4, atol=1e-5 * (1.0 + scale)))


def stats_differ(actual: Mapping[str, Array], recorded: Mapping[str, Any], stats: Sequence[str]) -> list[str]:
    """Which of ``stats`` differ between statistics computed now and statistics recorded in a file."""
    scale = max(
        (float(np.abs(np.asarray(actual[s], np.float64)).max()) for s in ("min", "max") if s in actual),
        default=0.0,
    )
    differ = []
    for stat in stats:
        if stat not in recorded or stat not in actual:
            continue
        try:
            value = np.asarray(recorded[stat], np.float64)
        except (TypeError, ValueError):
            differ.append(stat)
            continue
        ours = np.asarray(actual[stat], np.float64)
        if ours.size == value.size:  # (1,) and () name the same number
            ours = ours.reshape(value.shape)
        if not _close(ours, value, scale):
            differ.append(stat)
    return differ


def _stat_shape(feature: Mapping[str, Any]) -> tuple[int, ...]:
    if feature["dtype"] in ("video", "image"):
        return (int(feature["shape"][-1]), 1, 1)
    return tuple(int(s) for s in feature["shape"])


def stats_problems(
    raw: Any, features: Mapping[str, Mapping[str, Any]], expected: Mapping[str, Stats], path: Path
) -> list[str]:
    """What is wrong with ``meta/stats.json`` as parsed: shape, values, agreement with the episodes.

    ``expected`` is the aggregate of the episodes table's statistics; every feature it has must be
    in the file, shaped as the feature, finite, with std >= 0, min <= mean <= max, a positive count,
    and equal to it.
    """
    if not isinstance(raw, dict):
        return [f"{path}: a JSON {type(raw).__name__} where an object of per-feature statistics was expected"]
    problems: list[str] = []
    for key, want in expected.items():
        feature = features.get(key)
        if feature is None or feature["dtype"] == "string":
            continue
        entry = raw.get(key)
        if not isinstance(entry, dict):
            problems.append(f"{path}: {key} is {'missing' if entry is None else 'not an object'}")
            continue
        missing = [s for s in BASIC if s not in entry]
        if missing:
            problems.append(f"{path}: {key} has no {', '.join(missing)}")
            continue
        values: dict[str, Array] = {}
        shape = _stat_shape(feature)
        for stat, value in entry.items():
            try:
                arr = np.asarray(value, np.float64)
            except (TypeError, ValueError):
                problems.append(f"{path}: {key}.{stat} is not an array of numbers")
                continue
            want_shape = (1,) if stat == "count" else shape
            if arr.shape != want_shape:
                problems.append(f"{path}: {key}.{stat} has shape {arr.shape}; the feature needs {want_shape}")
            elif not np.isfinite(arr).all():
                problems.append(f"{path}: {key}.{stat} has NaN or infinite values")
            else:
                values[stat] = arr
        if not set(BASIC) <= values.keys():
            continue
        before = len(problems)
        if (values["std"] < 0).any():
            problems.append(f"{path}: {key}.std is negative")
        if (values["min"] > values["max"]).any():
            problems.append(f"{path}: {key}.min is above its max")
        elif ((values["mean"] < values["min"] - 1e-6) | (values["mean"] > values["max"] + 1e-6)).any():
            problems.append(f"{path}: {key}.mean lies outside [min, max]")
        if values["count"][0] < 1 or values["count"][0] != round(values["count"][0]):
            problems.append(f"{path}: {key}.count must be a positive whole number, got {values['count'][0]}")
        differ = stats_differ(want, values, [s for s in want if s in values])
        if differ and len(problems) == before:  # an absurd value is reported once, as such
            problems.append(
                f"{path}: {key} {', '.join(differ)} differ from the statistics of the episodes "
                "(LeRobot normalizes with these; rewrite them from the episodes table)"
            )
    return problems


def numeric_features(features: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Features stored as numbers in the data files (statistics are computed for each)."""
    return [k for k, f in features.items() if f["dtype"] not in NOT_NUMERIC]
