"""What a provider's prompt cache does to the price of prompt tokens.

Of a call's `prompt_tokens`, the provider's cache may have served some (`cached_prompt_tokens`:
billed at a fraction of the input price) and written some (`cache_write_tokens`: Anthropic
bills a write at 1.25 times the input price). A `report.prices` entry may name these prices
itself (`cached_prompt_per_1k`, `cache_write_per_1k`, and their `batch_` forms); otherwise
the provider's published share of the input price applies (`published_shares`), and where
none is known (a model served by vLLM, an unknown model), the input price: never less than
what was billed. The cost table's `cache_pricing` column says which rule priced each row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

PriceOf = Callable[[Mapping[str, float] | None, str, bool], float]
CACHE_COLUMNS = ["cached_prompt_tokens", "cache_write_tokens"]
CACHE_PRICE_KEYS = ("cached_prompt_per_1k", "cache_write_per_1k")

# (cache read, cache write) as shares of the input price, from each provider's price list:
# Anthropic (every Claude model; 5-minute cache writes), Gemini (2.5 and later; 2.0 and 1.5
# models bill cached tokens at a quarter; implicit caching writes cost nothing extra).
_ANTHROPIC = (0.1, 1.25)
_GEMINI_BY_PREFIX = (("gemini-2.0", 0.25), ("gemini-1.5", 0.25), ("gemini", 0.1))
# OpenAI (and the same models on Azure) by model family, longest prefix first; OpenAI's
# cache writes cost nothing extra.
_OPENAI_BY_PREFIX = (
    ("gpt-5", 0.1),
    ("gpt-4.1", 0.25),
    ("o4-mini", 0.25),
    ("o3", 0.25),
    ("gpt-4o", 0.5),
    ("o1", 0.5),
)


def published_shares(backend: str, model: str) -> tuple[float, float | None] | None:
    """The provider's published prices of a cache read and a cache write, as shares of the
    input price.

    Args:
        backend: The endpoint's backend (anthropic, gemini, openai, azure, ...).
        model: The model's name.

    Returns:
        (read share, write share: None where the provider bills no cache writes), or None
        where no published rate is known.
    """
    name = str(model).lower().rsplit("/", 1)[-1]
    if backend == "anthropic":
        return _ANTHROPIC
    table = {"gemini": _GEMINI_BY_PREFIX, "openai": _OPENAI_BY_PREFIX}.get(
        "openai" if backend == "azure" else str(backend), ()
    )
    for prefix, share in table:
        if name.startswith(prefix):
            return share, None
    return None


def cache_prices(
    entry: Mapping[str, float] | None,
    backend: str,
    model: str,
    prompt_price: float,
    *,
    price_of: PriceOf,
    batch: bool,
) -> tuple[float, float, str]:
    """USD per 1k cache-read and cache-write tokens of one cost-table row, and its rule.

    Args:
        entry: The model's `report.prices` entry (None: unpriced).
        backend: The row's backend.
        model: The row's model.
        prompt_price: Its input price per 1k tokens (at the batch rate for batch rows).
        price_of: `price_per_1k` (an entry's price of a key, at the batch rate if asked).
        batch: Whether the row was answered through a Batch API.

    Returns:
        (read price, write price, the rule in words).
    """
    explicit = [key for key in CACHE_PRICE_KEYS if key in (entry or {})]
    shares = published_shares(backend, model)
    read_share, write_share = shares or (1.0, None)
    prices = [
        price_of(entry, key, batch) if key in explicit else prompt_price * (share or 1.0)
        for key, share in zip(CACHE_PRICE_KEYS, (read_share, write_share), strict=True)
    ]
    if len(explicit) == len(CACHE_PRICE_KEYS):
        rule = "report.prices"
    elif shares is None:
        rule = "no published cache rate: at the input price"
    else:
        writes = "no writes billed" if write_share is None else f"writes {write_share:g}x"
        rule = f"{backend}'s published rates: reads {read_share:g}x input, {writes}"
        if explicit:
            rule += f" ({', '.join(explicit)} from report.prices)"
    return prices[0], prices[1], rule


def prompt_cost_per_1k(
    usage: pd.DataFrame,
    prices: Mapping[str, Mapping[str, float]],
    prompt_price: np.ndarray,
    price_of: PriceOf,
) -> tuple[np.ndarray, pd.Series | None]:
    """What each row's prompt tokens cost, in USD per 1k, and the cache rule of each row.

    Args:
        usage: Rows with model, backend, mode and prompt_tokens, and where known the
            `CACHE_COLUMNS` (of prompt_tokens; absent or null: none).
        prices: `report.prices`.
        prompt_price: Each row's input price per 1k tokens.
        price_of: `price_per_1k`.

    Returns:
        (prompt tokens times their prices, summed per row; the rule per row, None when
        `usage` has no cache columns: the run plan, which assumes no cache hits).
    """
    prompt = usage["prompt_tokens"].to_numpy(dtype="float64")
    if not set(CACHE_COLUMNS) <= set(usage.columns):
        return prompt * prompt_price, None
    read, write = (usage[c].fillna(0).to_numpy(dtype="float64") for c in CACHE_COLUMNS)
    cost = np.zeros(len(usage))
    rules = []
    for row, (model, backend, mode) in enumerate(
        zip(usage["model"], usage["backend"], usage["mode"], strict=True)
    ):
        if not read[row] and not write[row]:
            cost[row] = prompt[row] * prompt_price[row]
            rules.append("no cache tokens")
            continue
        read_price, write_price, rule = cache_prices(
            prices.get(model),
            str(backend),
            str(model),
            prompt_price[row],
            price_of=price_of,
            batch=mode == "batch",
        )
        uncached = max(prompt[row] - read[row] - write[row], 0.0)
        cost[row] = uncached * prompt_price[row] + read[row] * read_price + write[row] * write_price
        rules.append(rule)
    return cost, pd.Series(rules, index=usage.index, dtype=object)
