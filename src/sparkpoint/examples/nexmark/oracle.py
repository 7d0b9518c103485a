"""The queries' results computed without the pipeline runtime: DuckDB SQL over the event
files, written from the suite's SQL (the same columns, in DuckDB's dialect), and the
comparison of a run's committed output with them.

``check(name, events_dir, out)`` is empty when the rows committed under ``out`` are the
query's result (as a multiset; the upserts of q18 and q19 folded to each key's last
version first), and otherwise lists the rows missing and those not expected. Needs the
``duckdb`` package (a development dependency).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from sparkpoint.examples.nexmark.events import SIDE_INPUT
from sparkpoint.examples.nexmark.highest_bid import WINDOW_MS
from sparkpoint.examples.nexmark.hot_items import SIZE_MS, SLIDE_MS
from sparkpoint.examples.nexmark.new_users import WINDOW_MS as NEW_USERS_WINDOW_MS
from sparkpoint.examples.nexmark.queries import QUERIES
from sparkpoint.examples.nexmark.sessions import GAP_MS
from sparkpoint.examples.nexmark.winning_bids import PRECEDING
from sparkpoint.pipeline import TransactionalFileSink, to_json_line

Row = dict[str, Any]

#: The bids of the event files, as the suite's ``bid`` view (``{files}``: a glob).
BID_VIEW = """
CREATE VIEW bid AS
SELECT Bid.auction AS auction, Bid.bidder AS bidder, Bid.price AS price,
       Bid.channel AS channel, Bid.url AS url, Bid.date_time AS date_time,
       Bid.extra AS extra, epoch_ms(Bid.date_time) AS ts
FROM read_json('{files}', format = 'newline_delimited', columns = {{
    'Bid': 'STRUCT(auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
                   url VARCHAR, date_time BIGINT, extra VARCHAR)'}})
WHERE Bid IS NOT NULL
"""

#: The persons and the auctions of the event files, as the suite's views.
PERSON_VIEW = """
CREATE VIEW person AS
SELECT Person.* FROM read_json('{files}', format = 'newline_delimited', columns = {{
    'Person': 'STRUCT(id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR,
                      city VARCHAR, state VARCHAR, date_time BIGINT, extra VARCHAR)'}})
WHERE Person IS NOT NULL
"""
AUCTION_VIEW = """
CREATE VIEW auction AS
SELECT Auction.* FROM read_json('{files}', format = 'newline_delimited', columns = {{
    'Auction': 'STRUCT(id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT,
                       reserve BIGINT, date_time BIGINT, expires BIGINT, seller BIGINT,
                       category BIGINT, extra VARCHAR)'}})
WHERE Auction IS NOT NULL
"""

#: q13's side input (``{path}``), as the suite declares it.
SIDE_INPUT_TABLE = """
CREATE VIEW side_input AS
SELECT * FROM read_csv('{path}', header = false, columns = {{'key': 'BIGINT', 'value': 'VARCHAR'}})
"""

EUROS = "CAST(CAST(0.908 * price AS DECIMAL(23, 3)) AS VARCHAR)"
DAY = "strftime(ts, '%Y-%m-%d')"
CHANNEL_ID = "'(&|^)channel_id=([^&]*)'"


def _ranked(what: str) -> str:
    """The counts of q15 and q16: of every bid, then of each price rank."""
    ranks = ("price < 10000", "price >= 10000 AND price < 1000000", "price >= 1000000")
    columns = [f"{what} AS total_{{name}}"] + [
        f"{what} FILTER (WHERE {rank}) AS rank{n}_{{name}}" for n, rank in enumerate(ranks, 1)
    ]
    return ", ".join(columns)


_COUNTS = ", ".join(
    _ranked(what).format(name=name)
    for what, name in (
        ("count(*)", "bids"),
        ("count(DISTINCT bidder)", "bidders"),
        ("count(DISTINCT auction)", "auctions"),
    )
)


def session_sql(gap_ms: int) -> str:
    """q11 for a gap of ``gap_ms``: a bid ``gap_ms`` or more after its bidder's previous
    one starts a session; a session ends ``gap_ms`` after its last bid."""
    return f"""
        WITH marked AS (
            SELECT bidder, date_time,
                   CASE WHEN date_time - lag(date_time) OVER w < {gap_ms} THEN 0 ELSE 1 END AS new
            FROM bid WINDOW w AS (PARTITION BY bidder ORDER BY date_time)),
        numbered AS (
            SELECT *, sum(new) OVER (PARTITION BY bidder ORDER BY date_time, new DESC
                                     ROWS UNBOUNDED PRECEDING) AS session
            FROM marked)
        SELECT bidder, count(*) AS bid_count, min(date_time) AS starttime,
               max(date_time) + {gap_ms} AS endtime
        FROM numbered GROUP BY bidder, session"""


#: Each auction joined with the bids of its lifetime (q4, q9).
IN_LIFETIME = """
    auction a JOIN bid b ON a.id = b.auction AND b.date_time BETWEEN a.date_time AND a.expires"""
AUCTION_COLUMNS = """a.id, a.item_name, a.description, a.initial_bid, a.reserve, a.date_time,
    a.expires, a.seller, a.category, a.extra"""


def new_users_sql(size_ms: int) -> str:
    """q8 for windows of ``size_ms``: the persons and the sellers of each window, joined."""
    start = f"date_time - date_time % {size_ms}"
    return f"""
        SELECT p.id, p.name, p.starttime
        FROM (SELECT id, name, {start} AS starttime FROM person GROUP BY ALL) p
        JOIN (SELECT seller, {start} AS starttime FROM auction GROUP BY ALL) a
          ON p.id = a.seller AND p.starttime = a.starttime"""


def hot_items_sql(size_ms: int, slide_ms: int) -> str:
    """q5 for windows of ``size_ms`` every ``slide_ms``: each bid in the windows whose
    start is at most ``size_ms`` before it, counted per auction, and per window the
    auctions whose count is the highest."""
    return f"""
        WITH windowed AS (
            SELECT auction, date_time - date_time % {slide_ms} - k * {slide_ms} AS starttime
            FROM bid, range(0, {size_ms // slide_ms}) AS r(k)),
        counts AS (
            SELECT auction, starttime, count(*) AS num FROM windowed GROUP BY auction, starttime)
        SELECT auction, num FROM counts c
        WHERE num >= (SELECT max(num) FROM counts m WHERE m.starttime = c.starttime)"""


def highest_bid_sql(size_ms: int) -> str:
    """q7 for windows of ``size_ms``: the bids at a window's highest price whose time is
    in the window or at its end."""
    return f"""
        WITH highest AS (
            SELECT date_time - date_time % {size_ms} + {size_ms} AS window_end,
                   max(price) AS price
            FROM bid GROUP BY window_end)
        SELECT b.auction, b.bidder, b.price, b.date_time, b.extra
        FROM bid b JOIN highest h ON b.price = h.price
         AND b.date_time BETWEEN h.window_end - {size_ms} AND h.window_end"""


SQL: dict[str, str] = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": f"SELECT auction, bidder, {EUROS} AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q10": f"""SELECT auction, bidder, price, date_time, extra, {DAY} AS dt,
                      strftime(ts, '%H:%M') AS hm FROM bid""",
    "q14": f"""
        SELECT auction, bidder, {EUROS} AS price,
               CASE WHEN hour(ts) >= 8 AND hour(ts) <= 18 THEN 'dayTime'
                    WHEN hour(ts) <= 6 OR hour(ts) >= 20 THEN 'nightTime'
                    ELSE 'otherTime' END AS bidTimeType,
               date_time, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
        FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q21": f"""
        SELECT auction, bidder, price, channel,
               CASE lower(channel) WHEN 'apple' THEN '0' WHEN 'google' THEN '1'
                    WHEN 'facebook' THEN '2' WHEN 'baidu' THEN '3'
                    ELSE regexp_extract(url, {CHANNEL_ID}, 2) END AS channel_id
        FROM bid
        WHERE regexp_matches(url, {CHANNEL_ID})
           OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q13": """
        SELECT b.auction, b.bidder, b.price, b.date_time, s.value
        FROM bid b JOIN side_input s ON b.auction % 10000 = s.key""",
    "q22": """
        SELECT auction, bidder, price, channel, string_split(url, '/')[4] AS dir1,
               string_split(url, '/')[5] AS dir2, string_split(url, '/')[6] AS dir3
        FROM bid""",
    "q5": hot_items_sql(SIZE_MS, SLIDE_MS),
    "q7": highest_bid_sql(WINDOW_MS),
    "q11": session_sql(GAP_MS),
    "q15": f"SELECT {DAY} AS day, {_COUNTS} FROM bid GROUP BY {DAY}",
    "q16": f"""SELECT channel, {DAY} AS day, max(strftime(ts, '%H:%M')) AS minute, {_COUNTS}
               FROM bid GROUP BY channel, {DAY}""",
    "q17": f"""
        SELECT auction, {DAY} AS day, {_ranked("count(*)").format(name="bids")},
               min(price) AS min_price, max(price) AS max_price,
               sum(price) // count(*) AS avg_price, sum(price) AS sum_price
        FROM bid GROUP BY auction, {DAY}""",
    "q18": """
        SELECT auction, bidder, price, channel, url, date_time, extra FROM (
            SELECT *, row_number() OVER (
                PARTITION BY bidder, auction
                ORDER BY date_time DESC, price DESC, channel DESC, url DESC, extra DESC) AS n
            FROM bid)
        WHERE n = 1""",
    "q3": """
        SELECT p.name, p.city, p.state, a.id
        FROM auction a JOIN person p ON a.seller = p.id
        WHERE a.category = 10 AND p.state IN ('or', 'id', 'ca')""",
    "q4": f"""
        SELECT category, sum(final) // count(*) AS final FROM (
            SELECT a.id, a.category, max(b.price) AS final FROM {IN_LIFETIME} GROUP BY ALL)
        GROUP BY category""",
    "q6": f"""
        WITH winners AS (
            SELECT a.id, a.seller, b.price, b.date_time, row_number() OVER (
                PARTITION BY a.id
                ORDER BY b.price DESC, b.date_time, b.bidder, b.channel, b.url, b.extra) AS n
            FROM {IN_LIFETIME})
        SELECT seller, id AS auction, sum(price) OVER w // count(*) OVER w AS avg_price
        FROM winners WHERE n = 1
        WINDOW w AS (PARTITION BY seller ORDER BY date_time, id
                     ROWS BETWEEN {PRECEDING} PRECEDING AND CURRENT ROW)""",
    "q8": new_users_sql(NEW_USERS_WINDOW_MS),
    "q9": f"""
        SELECT * EXCLUDE (n) FROM (
            SELECT {AUCTION_COLUMNS}, b.auction, b.bidder, b.price,
                   b.date_time AS bid_date_time, b.extra AS bid_extra,
                   row_number() OVER (
                       PARTITION BY a.id
                       ORDER BY b.price DESC, b.date_time, b.bidder, b.channel, b.url, b.extra
                   ) AS n
            FROM {IN_LIFETIME})
        WHERE n = 1""",
    "q20": """
        SELECT b.auction, b.bidder, b.price, b.channel, b.url, b.date_time AS bid_date_time,
               b.extra AS bid_extra, a.item_name, a.description, a.initial_bid, a.reserve,
               a.date_time AS auction_date_time, a.expires, a.seller, a.category,
               a.extra AS auction_extra
        FROM bid b JOIN auction a ON b.auction = a.id
        WHERE a.category = 10""",
    "q19": """
        SELECT auction, bidder, price, channel, url, date_time, extra, rank_number FROM (
            SELECT *, row_number() OVER (
                PARTITION BY auction
                ORDER BY price DESC, date_time, bidder, channel, url, extra) AS rank_number
            FROM bid)
        WHERE rank_number <= 10""",
}


def expected_rows(name: str, events_dir: str | Path) -> list[Row]:
    """Query ``name``'s result over the event files under ``events_dir``."""
    return rows_of(SQL[name], events_dir)


def rows_of(sql: str, events_dir: str | Path) -> list[Row]:
    """The rows of ``sql`` over the views ``bid``, ``person`` and ``auction`` of the event
    files under ``events_dir``."""
    import duckdb

    with duckdb.connect() as db:
        files = str(Path(events_dir) / "*.jsonl")
        for view in (BID_VIEW, PERSON_VIEW, AUCTION_VIEW):
            db.execute(view.format(files=files))
        db.execute(SIDE_INPUT_TABLE.format(path=str(Path(events_dir) / SIDE_INPUT)))
        result = db.execute(sql)
        columns = [d[0] for d in result.description]
        return [dict(zip(columns, values, strict=True)) for values in result.fetchall()]


def committed_rows(name: str, out: str | Path) -> list[Row]:
    """The rows a run of query ``name`` committed under ``out``; upserts folded to each
    key's last version (the version itself dropped)."""
    rows = [json.loads(line) for line in TransactionalFileSink(str(out)).committed_lines()]
    key = QUERIES[name].upsert_key
    if not key:
        return rows
    latest: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        k = tuple(row[f] for f in key)
        if k not in latest or row["version"] > latest[k]["version"]:
            latest[k] = row
    return [{f: v for f, v in row.items() if f != "version"} for row in latest.values()]


def differences(expected: list[Row], actual: list[Row], *, show: int = 5) -> list[str]:
    """Empty when both hold the same rows as often; else the first few rows missing
    from ``actual`` and the first few it should not have."""
    want = Counter(to_json_line(r) for r in expected)
    got = Counter(to_json_line(r) for r in actual)
    missing, unexpected = sorted((want - got).elements()), sorted((got - want).elements())
    found = []
    if missing:
        found.append(f"{len(missing)} rows missing, e.g. {missing[:show]}")
    if unexpected:
        found.append(f"{len(unexpected)} rows not expected, e.g. {unexpected[:show]}")
    return found


def check(name: str, events_dir: str | Path, out: str | Path) -> list[str]:
    """The differences between query ``name``'s output under ``out`` and its result."""
    return differences(expected_rows(name, events_dir), committed_rows(name, out))
