"""The queries of Flink's Nexmark suite, by name, and those left out.

>>> list(QUERIES)  # doctest: +SKIP
['q0', 'q1', 'q2', 'q10', 'q14', 'q21', 'q22', 'q13', 'q5', 'q7', 'q11', 'q15', 'q16', …]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.examples.nexmark import (
    daily,
    highest_bid,
    hot_items,
    new_users,
    ranking,
    regular_join,
    sessions,
    winning_bids,
)
from sparkpoint.examples.nexmark.events import SIDE_INPUT, EventFiles
from sparkpoint.examples.nexmark.stateless import ROWS, SideInputJoin, stateless_query
from sparkpoint.pipeline import Pipeline, TransactionalFileSink, to_json_line


@dataclass(frozen=True)
class Query:
    name: str
    summary: str
    #: The event files (the streams of persons, auctions and bids; q13's side input is
    #: beside them) → the query's rows, before the sink.
    build: Callable[[EventFiles], Pipeline]
    #: Not empty: the rows are upserts of this key, each with a ``version`` (ranking.py).
    upsert_key: tuple[str, ...] = ()


def _stateless(name: str, summary: str) -> Query:
    return Query(name, summary, lambda files: stateless_query(ROWS[name], files.bids(), name))


def _of_bids(summary: str, query: Callable[[Pipeline], Pipeline], **kwargs: Any) -> Query:
    """A query of the bids alone: ``query(bids)``."""
    return Query(query.__name__, summary, lambda files: query(files.bids()), **kwargs)


def _joined(summary: str, query: Callable[[EventFiles], Pipeline], **kwargs: Any) -> Query:
    """A query of two kinds of events joined: ``query(files)``."""
    return Query(query.__name__, summary, query, **kwargs)


def _q13(files: EventFiles) -> Pipeline:
    side_input = SideInputJoin(Path(files.directory) / SIDE_INPUT)
    return stateless_query(side_input, files.bids(), "q13")


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
        Query("q13", "bids with the side input's value of their auction (a static table)", _q13),
        _of_bids("hot items: the auctions with the most bids per sliding window", hot_items.q5),
        _of_bids("the bids at the highest price of each 10 s window", highest_bid.q7),
        _of_bids("bids per bidder and session (10 s gap, event time)", sessions.q11),
        _of_bids("bids, bidders and auctions per day and price rank", daily.q15),
        _of_bids("q15 per channel, with the day's last minute", daily.q16),
        _of_bids("bids and prices per auction and day", daily.q17),
        _of_bids(
            "the last bid of each bidder on each auction (upserts)",
            ranking.q18,
            upsert_key=("bidder", "auction"),
        ),
        _of_bids(
            "the ten highest bids of each auction (upserts)",
            ranking.q19,
            upsert_key=("auction", "rank_number"),
        ),
        _joined("persons in OR, ID or CA with their auctions of category 10", regular_join.q3),
        _joined(
            "the average winning price of the closed auctions per category (upserts)",
            winning_bids.q4,
            upsert_key=("category",),
        ),
        _joined(
            "the average winning price of each seller's last closed auctions (upserts)",
            winning_bids.q6,
            upsert_key=("seller", "auction"),
        ),
        _joined(
            "the persons who opened an auction in the 10 s window they entered in", new_users.q8
        ),
        _joined("each auction with its winning bid", winning_bids.q9),
        _joined("the bids on auctions of category 10, with the auction", regular_join.q20),
    )
}

#: The suite's other queries and why they are not here (yet).
LEFT_OUT: dict[str, str] = {
    "q12": "processing-time windows: the result depends on the wall clock",
}


def query_pipeline(
    name: str,
    events_dir: str,
    out: str,
    *,
    job_id: str | None = None,
    parallelism: int = 4,
    bytes_per_epoch: int = 4 << 20,
    state_backend: str | None = None,
) -> Pipeline:
    """Query ``name`` over the event files under ``events_dir``, its rows committed as
    JSON lines under ``out``; keyed state in ``state_backend`` (default: the pipeline's
    default, ``$SPARKPOINT_STATE_BACKEND`` or memory)."""
    try:
        query = QUERIES[name]
    except KeyError:
        raise ValueError(f"unknown Nexmark query {name!r}: {why_not(name)}") from None
    files = EventFiles(job_id or f"nexmark-{name}", events_dir, parallelism, bytes_per_epoch)
    pipeline = query.build(files).sink(TransactionalFileSink(out, serialize=to_json_line))
    return pipeline.with_state_backend(state_backend) if state_backend else pipeline


def why_not(name: str) -> str:
    if name in LEFT_OUT:
        return f"{name} is left out: {LEFT_OUT[name]}"
    return f"the queries are {', '.join(QUERIES)}"
