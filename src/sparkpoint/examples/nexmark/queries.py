"""The queries of Flink's Nexmark suite that read bids alone, by name, and those left out.

>>> sorted(QUERIES)  # doctest: +SKIP
['q0', 'q1', 'q10', 'q11', 'q14', 'q15', 'q16', 'q17', 'q18', 'q19', 'q2', 'q21', 'q22', 'q5', 'q7']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from sparkpoint.examples.nexmark import daily, highest_bid, hot_items, ranking, sessions
from sparkpoint.examples.nexmark.events import bid_stream
from sparkpoint.examples.nexmark.stateless import stateless_query
from sparkpoint.pipeline import Pipeline, TransactionalFileSink, to_json_line


@dataclass(frozen=True)
class Query:
    name: str
    summary: str
    #: The bid stream (events.bid_stream) → the query's rows, before the sink.
    build: Callable[[Pipeline], Pipeline]
    #: Not empty: the rows are upserts of this key, each with a ``version`` (ranking.py).
    upsert_key: tuple[str, ...] = ()


def _stateless(name: str, summary: str) -> Query:
    return Query(name, summary, partial(stateless_query, name))


QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        _stateless("q0", "pass-through: every bid"),
        _stateless("q1", "currency conversion: every bid's price in euros"),
        _stateless("q2", "selection: the bids of auctions whose id is a multiple of 123"),
        _stateless("q10", "every bid with the date and minute it is filed under"),
        _stateless("q14", "bids within a price band, their time of day, a character count"),
        _stateless("q21", "bids with a channel id, from the channel or the URL"),
        _stateless("q22", "bids with the first three directories of their URL"),
        Query("q5", "hot items: the auctions with the most bids per sliding window", hot_items.q5),
        Query("q7", "the bids at the highest price of each 10 s window", highest_bid.q7),
        Query("q11", "bids per bidder and session (10 s gap, event time)", sessions.q11),
        Query("q15", "bids, bidders and auctions per day and price rank", daily.q15),
        Query("q16", "q15 per channel, with the day's last minute", daily.q16),
        Query("q17", "bids and prices per auction and day", daily.q17),
        Query(
            "q18",
            "the last bid of each bidder on each auction (upserts)",
            ranking.q18,
            upsert_key=("bidder", "auction"),
        ),
        Query(
            "q19",
            "the ten highest bids of each auction (upserts)",
            ranking.q19,
            upsert_key=("auction", "rank_number"),
        ),
    )
}

#: The suite's other queries and why they are not here (yet).
LEFT_OUT: dict[str, str] = {
    "q3": "joins persons with their auctions: needs two-input joins",
    "q4": "joins auctions with their bids: needs two-input joins",
    "q6": "an OVER window over the updating result of a join (a seller's last 10 closed "
    "auctions): Flink does not run it either, the suite marks it unsupported",
    "q8": "joins new persons with their new auctions per window: needs two-input joins",
    "q9": "joins auctions with their bids (the winning bid): needs two-input joins",
    "q12": "processing-time windows: the result depends on the wall clock",
    "q13": "joins bids with a bounded side input (a table in a file): a join",
    "q20": "joins bids with their auctions: needs two-input joins",
}


def query_pipeline(
    name: str,
    events_dir: str,
    out: str,
    *,
    job_id: str | None = None,
    parallelism: int = 4,
    bytes_per_epoch: int = 4 << 20,
) -> Pipeline:
    """Query ``name`` over the event files under ``events_dir``, its rows committed as
    JSON lines under ``out``."""
    try:
        query = QUERIES[name]
    except KeyError:
        raise ValueError(f"unknown Nexmark query {name!r}: {why_not(name)}") from None
    bids = bid_stream(
        job_id or f"nexmark-{name}", events_dir,
        parallelism=parallelism, bytes_per_epoch=bytes_per_epoch,
    )  # fmt: skip
    return query.build(bids).sink(TransactionalFileSink(out, serialize=to_json_line))


def why_not(name: str) -> str:
    if name in LEFT_OUT:
        return f"{name} is left out: {LEFT_OUT[name]}"
    return f"the queries are {', '.join(QUERIES)}"
