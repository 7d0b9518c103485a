"""Per-user totals of click events enriched with Spark SQL: a DataFrame stage before
``key_by`` and one after the keyed function.

Before ``key_by``, each epoch's clicks are a DataFrame: help-page clicks are dropped, the
page is upper-cased, the amount (cents) becomes euros, and a left join with a small
static table of user → country adds the country (``"unknown"`` for users not in it). The
keyed function keeps each user's running clicks and euros and the last page; after it, a
DataFrame stage adds the ``average`` euros per click and a ``label``. Both stages are deterministic,
so output stays exactly-once when Spark recomputes them.

:func:`expected_output` computes the same lines offline, from the same source records,
without Spark: the exactly-once test compares it with what the sink committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline import (
    Context,
    KeyedProcessFunction,
    Pipeline,
    RuntimeContext,
    Source,
    TransactionalFileSink,
    ValueStateDescriptor,
    to_json_line,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

COUNTRIES = ("DE", "FR", "NL", "PL")
#: The schema of a click event as the DataFrame stage reads it.
CLICK_SCHEMA = "user STRING, ts BIGINT, page STRING, amount BIGINT"
#: The keyed function's outputs as the DataFrame stage after it reads them.
TOTAL_SCHEMA = "user STRING, country STRING, clicks BIGINT, euros DOUBLE, last_page STRING"


def country_of(user: str) -> str | None:
    """The static table's country of ``user`` (every seventh user has none)."""
    number = int(user.rsplit("-", 1)[1])
    return None if number % 7 == 0 else COUNTRIES[number % len(COUNTRIES)]


def user_countries(users: int) -> list[tuple[str, str]]:
    """The static table: ``(user, country)`` rows."""
    rows = ((f"user-{n:05d}", country_of(f"user-{n:05d}")) for n in range(users))
    return [(user, country) for user, country in rows if country is not None]


class EnrichClicks:
    """The DataFrame stage before key_by (a picklable object: it holds the table's rows,
    and the table is made from them in each epoch's plan)."""

    def __init__(self, users: int) -> None:
        self.countries = user_countries(users)

    def __call__(self, clicks: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        table = clicks.sparkSession.createDataFrame(self.countries, "user STRING, country STRING")
        return (
            clicks.where(F.col("page") != "help")
            .withColumn("page", F.upper("page"))
            .withColumn("euros", F.col("amount") / F.lit(100.0))
            .join(F.broadcast(table), on="user", how="left")
            .withColumn("country", F.coalesce(F.col("country"), F.lit("unknown")))
            .drop("amount")
        )


def label_totals(totals: DataFrame) -> DataFrame:
    """The DataFrame stage after the keyed function."""
    from pyspark.sql import functions as F

    return totals.withColumn("average", F.col("euros") / F.col("clicks")).withColumn(
        "label", F.concat_ws(":", F.lower("country"), "user")
    )


class CountryTotals(KeyedProcessFunction):
    """Per user: running clicks and euros, and the last page, after every click."""

    def open(self, ctx: RuntimeContext) -> None:
        self.totals = ctx.get_state(ValueStateDescriptor("totals", (0, 0.0)))

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        clicks, euros = self.totals.value()
        clicks, euros = clicks + 1, euros + value["euros"]
        self.totals.update((clicks, euros))
        ctx.collect(
            {
                "user": key,
                "country": value["country"],
                "clicks": clicks,
                "euros": euros,
                "last_page": value["page"],
            }
        )


def user_of(record: dict[str, Any]) -> str:
    return str(record["user"])


def country_totals_pipeline(
    job_id: str, source: Source, output_dir: str, *, users: int, parallelism: int = 4
) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=parallelism, max_parallelism=128)
        .source(source)
        .dataframe(EnrichClicks(users), schema=CLICK_SCHEMA, name="enrich-clicks")
        .key_by(user_of)
        .process(CountryTotals())
        .dataframe(label_totals, schema=TOTAL_SCHEMA, name="label-totals")
        .sink(TransactionalFileSink(output_dir))
    )


def expected_output(records: Iterable[tuple[str, int, dict[str, Any]]]) -> list[str]:
    """The job's output lines, sorted, from ``(split, position, event)`` records: each
    user's clicks in (split, position) order, without Spark."""
    by_user: dict[str, list[tuple[tuple[str, int], dict[str, Any]]]] = {}
    for split, position, event in records:
        if event["page"] != "help":
            by_user.setdefault(user_of(event), []).append(((split, position), event))
    lines: list[str] = []
    for user, events in by_user.items():
        events.sort(key=lambda e: e[0])
        clicks, euros = 0, 0.0
        for _, event in events:
            clicks, euros = clicks + 1, euros + event["amount"] / 100.0
            country = country_of(user) or "unknown"
            line = {
                "user": user,
                "country": country,
                "clicks": clicks,
                "euros": euros,
                "last_page": event["page"].upper(),
                "average": euros / clicks,
                "label": f"{country.lower()}:{user}",
            }
            lines.append(to_json_line(line))
    return sorted(lines)
