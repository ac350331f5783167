"""The pure half of bench/fidelity_rank.py: how a cheap complete run ranks configurations against
full training, replayed on recorded values (no training, no optuna).

Every function takes arrays over the same configurations: ``full`` (the full run's value),
``low`` (the low-fidelity run's value), and their measured costs. ``continues``: the low fidelity
is the full run's own first epoch (a first look), so a promoted configuration goes on from it
instead of starting again. Orders are drawn once per seed and shared by every fidelity, so the
fidelities are compared on the same orders.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr


def orders(n: int, count: int = 1000, seed: int = 0) -> np.ndarray:
    """``count`` random orders of ``n`` configurations (one row each), the same for a seed."""
    rng = np.random.default_rng(seed)
    return np.array([rng.permutation(n) for _ in range(count)], dtype=int).reshape(count, n)


def spearman(low, full) -> float | None:
    """Spearman's rank correlation of the low fidelity's values with the full runs'; None where
    either side is constant (no ranking to compare)."""
    low, full = np.asarray(low, float), np.asarray(full, float)
    if len(low) < 3 or np.ptp(low) == 0 or np.ptp(full) == 0:
        return None
    return float(spearmanr(low, full).statistic)


def spearman_interval(low, full, count: int = 1000, seed: int = 0) -> list[float] | None:
    """95% percentile bootstrap interval of ``spearman`` over configurations drawn with
    replacement (a resample without a ranking on either side is left out)."""
    low, full = np.asarray(low, float), np.asarray(full, float)
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(count):
        pick = rng.integers(0, len(low), len(low))
        value = spearman(low[pick], full[pick])
        if value is not None and np.isfinite(value):
            found.append(value)
    if not found:
        return None
    return [round(float(x), 4) for x in np.percentile(found, [2.5, 97.5])]


def promoted(order, low, eta: int) -> np.ndarray:
    """ASHA's rule along ``order``: a configuration goes on to the full run when its low-fidelity
    value is in the top 1/``eta`` of the values seen so far, itself included: its place (ties in
    its favour) within the first ceil(seen / eta), so the first configuration always goes on.
    One flag per position of ``order``."""
    low = np.asarray(low, float)
    seen = low[np.asarray(order)]
    flags = np.zeros(len(seen), bool)
    for i, value in enumerate(seen):
        place = 1 + int(np.sum(seen[: i + 1] > value))
        flags[i] = place <= -(-(i + 1) // eta)
    return flags


def _extra(low_cost, full_cost, continues: bool) -> np.ndarray:
    """What promoting a configuration costs beyond its low-fidelity run."""
    full_cost = np.asarray(full_cost, float)
    return full_cost - np.asarray(low_cost, float) if continues else full_cost


def promotion_replay(
    low, full, low_cost, full_cost, eta: int, runs: np.ndarray, continues: bool = False
) -> dict:
    """Every configuration screened in each order of ``runs``: the share of orders in which a
    configuration with the best full value is promoted, the mean share promoted, and the
    configurations judged per full trial's compute (all of them, over what the screening and
    the promoted full runs cost, in mean full runs)."""
    full, low_cost = np.asarray(full, float), np.asarray(low_cost, float)
    extra = _extra(low_cost, full_cost, continues)
    best = set(np.flatnonzero(full == full.max()))
    unit = float(np.mean(full_cost))
    kept, shares, judged = 0, [], []
    for order in runs:
        flags = promoted(order, low, eta)
        chosen = np.asarray(order)[flags]
        kept += bool(best & set(chosen.tolist()))
        shares.append(flags.mean())
        judged.append(len(order) / ((low_cost.sum() + extra[chosen].sum()) / unit))
    return {
        "best_promoted_share": round(kept / len(runs), 4),
        "promoted_share": round(float(np.mean(shares)), 4),
        "judged_per_full_trial": round(float(np.mean(judged)), 3),
    }


def random_full_best(full, full_cost, order, budget: float) -> float | None:
    """(b): full trials in ``order`` while they fit ``budget``; the best full value reached."""
    spent, best = 0.0, None
    for i in order:
        spent += full_cost[i]
        if spent > budget:
            break
        best = full[i] if best is None else max(best, full[i])
    return best


def screened_best(
    low, full, low_cost, full_cost, order, budget: float, eta: int, continues: bool = False
) -> float | None:
    """(c): each configuration of ``order`` screened at the low fidelity, promoted by ASHA's rule
    to a full run; the best full value among the promoted whose full run fits ``budget``."""
    extra = _extra(low_cost, full_cost, continues)
    flags = promoted(order, low, eta)
    spent, best = 0.0, None
    for i, promote in zip(order, flags, strict=True):
        spent += low_cost[i]
        if spent > budget:
            break
        if promote:
            spent += extra[i]
            if spent > budget:
                break
            best = full[i] if best is None else max(best, full[i])
    return best


def budget_replay(
    low,
    full,
    low_cost,
    full_cost,
    budgets: tuple[int, ...],
    eta: int,
    runs: np.ndarray,
    continues: bool = False,
) -> dict:
    """Per budget of N mean full trials' compute: the mean best full value of (b) random full
    trials and of (c) screening then promoting, over the orders of ``runs`` (an order that
    reached no full value is left out of the mean and counted), and the share of orders in which
    (c) is at least (b) (nothing reached counts as worse than any value)."""
    full, low_cost, full_cost = (np.asarray(x, float) for x in (full, low_cost, full_cost))
    found = {}
    for n in budgets:
        budget = n * float(full_cost.mean())
        plain = [random_full_best(full, full_cost, order, budget) for order in runs]
        screen = [
            screened_best(low, full, low_cost, full_cost, order, budget, eta, continues)
            for order in runs
        ]
        found[str(n)] = {
            "random_full_mean_best": _mean(plain),
            "screened_mean_best": _mean(screen),
            "screened_at_least_random_share": round(
                float(np.mean([_at_least(c, b) for c, b in zip(screen, plain, strict=True)])), 4
            ),
            "random_full_none_share": round(plain.count(None) / len(runs), 4),
            "screened_none_share": round(screen.count(None) / len(runs), 4),
        }
    return found


def _mean(values: list) -> float | None:
    reached = [v for v in values if v is not None]
    return round(float(np.mean(reached)), 4) if reached else None


def _at_least(screened, plain) -> bool:
    if screened is None:
        return plain is None
    return plain is None or screened >= plain
