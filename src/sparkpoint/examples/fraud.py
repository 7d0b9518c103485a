"""Fraud rules by broadcast: payments checked against limits that change at run time.

The payments (generated clicks: a user pays ``amount`` on ``page``) are keyed by user;
the rules — per page, the largest amount allowed — are a small stream broadcast to
every subtask and kept in broadcast state. :class:`CheckPayments`, a
``KeyedBroadcastProcessFunction``, stores each rule (``process_broadcast_element``) and
checks each payment against the rule of its page as it stands (``process_element``),
counting the user's payments over the limit in keyed state. Every payment is written
with the limit it was checked against, so the output shows which rules each key saw.

An epoch's rules are applied on every subtask before its payments: a rule read in epoch
n holds for every payment of epoch n, whatever its key. :func:`expected_checks`
computes the same lines offline from the epochs the records are read in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.pipeline import (
    BroadcastContext,
    Context,
    Key,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    Pipeline,
    RuntimeContext,
    Source,
    TransactionalFileSink,
    ValueStateDescriptor,
    to_json_line,
)

#: Per page, the largest amount a payment may have without being flagged.
RULES: MapStateDescriptor[str, int] = MapStateDescriptor("rules")
FLAGGED: ValueStateDescriptor[int] = ValueStateDescriptor("flagged", 0)


def as_rule(click: dict[str, Any]) -> dict[str, Any]:
    """A generated click read as a rule: payments on its page may be up to its amount."""
    return {"page": click["page"], "limit": click["amount"]}


def user_of(payment: dict[str, Any]) -> str:
    return str(payment["user"])


class CheckPayments(KeyedBroadcastProcessFunction):
    def open(self, ctx: RuntimeContext) -> None:
        self.flagged = ctx.get_state(FLAGGED)

    def process_broadcast_element(self, rule: Any, ctx: BroadcastContext) -> None:
        ctx.get_broadcast_state(RULES).put(rule["page"], rule["limit"])

    def process_element(self, key: Key, payment: Any, ctx: Context) -> None:
        limit = ctx.get_broadcast_state(RULES).get(payment["page"])
        over = limit is not None and payment["amount"] > limit
        if over:
            self.flagged.update(self.flagged.value() + 1)
        ctx.collect(checked(payment, limit, over, self.flagged.value()))


def checked(payment: dict[str, Any], limit: int | None, over: bool, flagged: int) -> dict[str, Any]:
    return {**payment, "limit": limit, "over": over, "flagged": flagged}


def fraud_pipeline(
    job_id: str, payments: Source, rules: Source, out: str, parallelism: int = 4
) -> Pipeline:
    p = Pipeline(job_id, parallelism=parallelism)
    rule_stream = p.source(rules, uid="rules").map(as_rule).broadcast(RULES)
    return (
        p.source(payments, uid="payments")
        .key_by(user_of, key_type=str)
        .connect(rule_stream)
        .process(CheckPayments(), uid="check")
        .sink(TransactionalFileSink(out, serialize=to_json_line))
    )


def expected_checks(
    payments: Iterable[tuple[str, int, dict[str, Any]]],
    rules: Iterable[tuple[str, int, dict[str, Any]]],
    payments_per_split: int,
    rules_per_split: int,
) -> tuple[list[str], dict[str, int]]:
    """Offline: the lines :func:`fraud_pipeline` commits (sorted) and the rules at the
    end. A payment read in epoch n is checked against every rule read in epochs 1…n,
    applied in order; each input reads its number per split and epoch."""
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for _, position, record in sorted(rules, key=lambda r: (r[0], r[1])):
        by_epoch.setdefault(position // rules_per_split + 1, []).append(as_rule(record))
    lines, flagged = [], {}
    limits: dict[str, int] = {}
    applied = 0
    for _, position, payment in sorted(payments, key=lambda r: (r[1], r[0])):
        epoch = position // payments_per_split + 1
        while applied < epoch:
            applied += 1
            limits.update((r["page"], r["limit"]) for r in by_epoch.get(applied, ()))
        limit = limits.get(payment["page"])
        over = limit is not None and payment["amount"] > limit
        flagged[payment["user"]] = flagged.get(payment["user"], 0) + over
        lines.append(to_json_line(checked(payment, limit, over, flagged[payment["user"]])))
    while applied < max(by_epoch, default=0):
        applied += 1
        limits.update((r["page"], r["limit"]) for r in by_epoch.get(applied, ()))
    return sorted(lines), limits
