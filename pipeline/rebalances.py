"""Rebalance history from the group event stream: ``python -m pipeline.rebalances``.

A batch job. It reads the whole ``__kafkalite_group_events`` topic (JSON
records keyed by group id, written by kafkalite's group coordinator; see
``broker/coordinator/events.py``) through Spark's Kafka source, hands each
group's events, in log order, to a pandas function (``applyInPandas``, so
groups spread over the executors), and writes one row per rebalance and one
summary row per group.

A *rebalance* is, for a classic group, one "rebalance completed" event (with
the "rebalance started" that opened it, if still in the log); for a KIP-848
consumer group, one group epoch: opened by "consumer group epoch bumped" or
"consumer group member removed", with its "target assignment computed" and
the members' "consumer member reconciled" events (whose revoked and
assigned partitions also tell which member owns what, so the partitions of a
member that is removed count as moved, to nobody).

Per rebalance (``rebalances/``):

* ``trigger`` (member joined / member left / member expired / member rejoined /
  metadata changed / subscription changed / other) and the coordinator's
  ``reason``;
* ``join_ms`` and ``sync_ms`` (classic), or ``reconciliation_ms`` (KIP-848:
  from the epoch bump to the last member reconciled at that epoch; members
  whose partitions the epoch left alone write no event and do not count) and
  ``assignor_ms``;
* ``stop_the_world_ms``: join + sync for a classic group (no member consumes
  while it runs); 0 for a KIP-848 group, whose members keep their unrevoked
  partitions throughout;
* ``members`` after it, and the ``members_joined`` / ``members_left`` /
  ``members_expired``;
* ``partitions_moved`` (partitions whose owner changed, an owner of "nobody"
  included: a cooperative hand-over moves a partition twice, revoke then
  assign) and ``partitions_kept``: of the partitions the group has consumed
  so far (the union of all partitions its events named up to then), those
  that did not move; 0 when the group is left empty.

Per group (``rebalance_groups/``): rebalance count, total stop-the-world and
reconciliation time, partitions moved and kept, and the stickiness ratio
``kept / (kept + moved)`` (null when both are 0).

Outputs, under ``--output``: ``rebalances/`` and ``rebalance_groups/``
(Parquet), ``rebalances.png`` (a timeline), and the tables on stdout.
"""

from __future__ import annotations

import json
import sys

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline import common
from pipeline import spark as ps

EVENTS_TOPIC = "__kafkalite_group_events"

REBALANCE = T.StructType([
    T.StructField("group", T.StringType()),
    T.StructField("group_type", T.StringType()),  # classic | consumer
    T.StructField("seq", T.IntegerType()),  # 1, 2, ... within the group
    T.StructField("generation", T.IntegerType()),  # generation (classic) or group epoch (consumer) after it
    T.StructField("generation_before", T.IntegerType()),
    T.StructField("started_at", T.TimestampType()),
    T.StructField("completed_at", T.TimestampType()),
    T.StructField("trigger", T.StringType()),
    T.StructField("reason", T.StringType()),
    T.StructField("protocol", T.StringType()),
    T.StructField("join_ms", T.DoubleType()),
    T.StructField("sync_ms", T.DoubleType()),
    T.StructField("reconciliation_ms", T.DoubleType()),
    T.StructField("assignor_ms", T.DoubleType()),
    T.StructField("stop_the_world_ms", T.DoubleType()),
    T.StructField("members", T.IntegerType()),
    T.StructField("members_joined", T.ArrayType(T.StringType())),
    T.StructField("members_left", T.ArrayType(T.StringType())),
    T.StructField("members_expired", T.ArrayType(T.StringType())),
    T.StructField("partitions_moved", T.ArrayType(T.StringType())),
    T.StructField("moved", T.IntegerType()),
    T.StructField("kept", T.IntegerType()),
    T.StructField("completed", T.BooleanType()),
])
_COLS = [f.name for f in REBALANCE.fields]
_EXPIRY_WORDS = ("expired", "timeout")


def _ts(seconds):
    return None if seconds is None else pd.Timestamp(float(seconds), unit="s")


def _classic_trigger(joined, left, expired, reason: str) -> str:
    if joined:
        return "member joined"
    if expired:
        return "member expired"
    if left:
        return "member left"
    r = (reason or "").lower()
    if "rejoin" in r:
        return "member rejoined"
    if "metadata" in r:
        return "metadata changed"
    return "other"


def _consumer_trigger(reason: str) -> str:
    r = (reason or "").lower()
    if r == "member joined":
        return "member joined"
    if any(w in r for w in _EXPIRY_WORDS):
        return "member expired"
    if "left" in r:
        return "member left"
    if "subscription" in r or "regex" in r:
        return "subscription changed"
    if "metadata" in r:
        return "metadata changed"
    return "other"


def group_rebalances(group: str, events: list[dict]) -> list[dict]:
    """The rebalance rows of one group, from its events in log order."""
    rows: list[dict] = []
    seen: set[str] = set()  # partitions the group's events have named so far
    started: dict | None = None  # the open classic "rebalance started"
    epochs: dict[int, dict] = {}  # open KIP-848 epochs
    members: set[str] = set()  # KIP-848 members, as far as the stream tells
    owned: dict[str, set[str]] = {}  # KIP-848 member -> partitions, from its reconciliations

    def finish(row: dict) -> None:
        moved = sorted(set(row["partitions_moved"] or []))
        seen.update(moved)
        row["partitions_moved"] = moved
        row["moved"] = len(moved)
        row["kept"] = 0 if not row["members"] else max(0, len(seen) - len(moved))
        rows.append(row)

    def close_epoch(epoch: int) -> None:
        e = epochs.pop(epoch)
        moved = set(e["revoked"]) | set(e["assigned"]) | set(e["released"])
        seen.update(e["revoked"])
        recon = None
        if e["last_reconciled"] is not None:
            recon = round((e["last_reconciled"] - e["ts"]) * 1000.0, 3)
        finish({
            "group": group, "group_type": "consumer", "generation": epoch, "generation_before": e["before"],
            "started_at": _ts(e["ts"]), "completed_at": _ts(e["last_reconciled"] or e["ts"]),
            "trigger": _consumer_trigger(e["reason"]), "reason": e["reason"], "protocol": e["assignor"],
            "join_ms": None, "sync_ms": None, "reconciliation_ms": recon, "assignor_ms": e["assignor_ms"],
            "stop_the_world_ms": 0.0, "members": e["members"] if e["members"] is not None else len(members),
            "members_joined": e["joined"], "members_left": e["left"], "members_expired": e["expired"],
            "partitions_moved": sorted(moved), "completed": e["last_reconciled"] is not None or not members,
        })

    def open_epoch(epoch: int, ts: float, reason: str) -> dict:
        for old in sorted(k for k in epochs if k < epoch):
            close_epoch(old)
        if epoch not in epochs:
            epochs[epoch] = {"ts": ts, "before": epoch - 1, "reason": reason, "assignor": None, "assignor_ms": None,
                             "members": None, "joined": [], "left": [], "expired": [], "revoked": [], "assigned": [],
                             "released": [], "last_reconciled": None}
        return epochs[epoch]

    for ev in events:
        name = ev.get("event")
        ts = ev.get("ts")
        if name == "rebalance started":
            started = ev
        elif name == "rebalance completed":
            opened = started if started is not None and started.get("generation") == ev.get("generation_before") else None
            started = None
            joined = [m.get("member") for m in ev.get("members_joined") or []]
            left = [m.get("member") for m in ev.get("members_left") or []]
            expired = [m.get("member") for m in ev.get("members_expired") or []]
            join_ms, sync_ms = float(ev.get("join_ms") or 0), float(ev.get("sync_ms") or 0)
            finish({
                "group": group, "group_type": "classic", "generation": ev.get("generation_after"),
                "generation_before": ev.get("generation_before"),
                "started_at": _ts(opened["ts"] if opened else ts - (join_ms + sync_ms) / 1000.0), "completed_at": _ts(ts),
                "trigger": _classic_trigger(joined, left, expired, ev.get("reason")), "reason": ev.get("reason"),
                "protocol": ev.get("protocol"), "join_ms": join_ms, "sync_ms": sync_ms, "reconciliation_ms": None,
                "assignor_ms": None, "stop_the_world_ms": join_ms + sync_ms, "members": ev.get("members"),
                "members_joined": joined, "members_left": left, "members_expired": expired,
                "partitions_moved": ev.get("partitions_moved") or [], "completed": True,
            })
        elif name == "consumer group epoch bumped":
            e = open_epoch(int(ev["epoch"]), ts, ev.get("reason"))
            if ev.get("reason") == "member joined" and ev.get("member"):
                e["joined"].append(ev["member"])
                members.add(ev["member"])
        elif name == "consumer group member removed":
            e = open_epoch(int(ev["epoch"]), ts, ev.get("reason"))
            member = ev.get("member")
            members.discard(member)
            e["released"] += sorted(owned.pop(member, set()))  # now owned by nobody
            reason = (ev.get("reason") or "").lower()
            (e["expired"] if any(w in reason for w in _EXPIRY_WORDS) else e["left"]).append(member)
            if not members:
                e["members"] = 0
        elif name == "target assignment computed":
            e = open_epoch(int(ev["epoch"]), ts, "target assignment")
            e["assignor"], e["assignor_ms"], e["members"] = ev.get("assignor"), ev.get("assignor_ms"), ev.get("members")
        elif name == "consumer member reconciled":
            epoch = int(ev.get("group_epoch") or 0)
            e = epochs.get(epoch) or open_epoch(epoch, ts, "reconciliation")
            e["revoked"] += ev.get("revoked") or []
            e["assigned"] += ev.get("assigned") or []
            mine = owned.setdefault(ev.get("member"), set())
            mine.difference_update(ev.get("revoked") or [])
            mine.update(ev.get("assigned") or [])
            if ev.get("state") == "STABLE" and ev.get("member_epoch") == epoch:
                e["last_reconciled"] = ts
        elif name == "group converted":
            started = None
    for epoch in sorted(epochs):
        close_epoch(epoch)
    if started is not None:  # a classic rebalance still running when the log ends
        rows.append({c: None for c in _COLS} | {
            "group": group, "group_type": "classic", "generation_before": started.get("generation"),
            "started_at": _ts(started.get("ts")), "reason": started.get("reason"),
            "trigger": _classic_trigger(False, False, False, started.get("reason")) if "Adding new member" not in (started.get("reason") or "") else "member joined",
            "members_joined": [], "members_left": [], "members_expired": [], "partitions_moved": [],
            "moved": 0, "kept": 0, "completed": False,
        })
    rows.sort(key=lambda r: (r["started_at"] is None, r["started_at"] or pd.Timestamp(0)))
    for i, r in enumerate(rows, 1):
        r["seq"] = i
    return rows


def _per_group(pdf: pd.DataFrame) -> pd.DataFrame:
    pdf = pdf.sort_values(["log_offset"])
    group = pdf["group"].iloc[0]
    events = []
    for raw in pdf["value"]:
        try:
            events.append(json.loads(raw))
        except (TypeError, ValueError):
            continue
    out = pd.DataFrame(group_rebalances(group, events), columns=_COLS)
    for c in ("seq", "generation", "generation_before", "members", "moved", "kept"):
        out[c] = out[c].astype("Int32")
    for c in ("join_ms", "sync_ms", "reconciliation_ms", "assignor_ms", "stop_the_world_ms"):
        out[c] = out[c].astype("float64")
    out["completed"] = out["completed"].astype("boolean")
    for c in ("started_at", "completed_at"):
        out[c] = pd.to_datetime(out[c])
    return out


def compute(spark, bootstrap: str, kafka: dict | None = None, topic: str = EVENTS_TOPIC):
    """(rebalances, groups) Spark DataFrames."""
    common.ship_code(spark)
    with common.internal_topic_reads(spark):
        events = common.read_topic(spark, bootstrap, topic, kafka).select(
            F.col("key").cast("string").alias("group"),
            F.col("offset").alias("log_offset"),
            F.col("value").cast("string").alias("value"),
        ).where(F.col("group").isNotNull())
        rebalances = events.groupBy("group").applyInPandas(_per_group, REBALANCE).cache()
        rebalances.count()  # materialise while the internal-topic reader is selected
    groups = rebalances.groupBy("group").agg(
        F.first("group_type").alias("group_type"),
        F.count("*").alias("rebalances"),
        F.sum("stop_the_world_ms").alias("stop_the_world_ms"),
        F.sum("reconciliation_ms").alias("reconciliation_ms"),
        F.sum("moved").alias("partitions_moved"),
        F.sum("kept").alias("partitions_kept"),
        F.sum(F.size("members_joined")).alias("members_joined"),
        F.sum(F.size("members_left")).alias("members_left"),
        F.sum(F.size("members_expired")).alias("members_expired"),
        F.min("started_at").alias("first_rebalance"),
        F.max("completed_at").alias("last_rebalance"),
    ).withColumn(
        "stickiness",
        F.when(F.col("partitions_kept") + F.col("partitions_moved") > 0,
               F.col("partitions_kept") / (F.col("partitions_kept") + F.col("partitions_moved"))),
    ).orderBy("group")
    return rebalances.orderBy("group", "seq"), groups


def chart(rebalances: pd.DataFrame, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    groups = sorted(rebalances["group"].unique()) if len(rebalances) else []
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.6 * len(groups) + 1.5)))
    colours = {"member joined": "tab:green", "member left": "tab:orange", "member expired": "tab:red",
               "member rejoined": "tab:blue", "subscription changed": "tab:purple", "metadata changed": "tab:brown"}
    for y, g in enumerate(groups):
        rows = rebalances[rebalances["group"] == g]
        for r in rows.itertuples():
            if pd.isna(r.started_at):
                continue
            start = mdates.date2num(r.started_at.to_pydatetime())
            end = mdates.date2num((r.completed_at if not pd.isna(r.completed_at) else r.started_at).to_pydatetime())
            width = max(end - start, 1.0 / 86400 / 20)  # at least 50 ms, to stay visible
            ax.barh(y, width, left=start, height=0.5, color=colours.get(r.trigger, "tab:gray"))
            if r.moved:
                ax.text(start, y + 0.3, str(int(r.moved)), fontsize="x-small")
    ax.set_yticks(range(len(groups)), groups)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()] + [plt.Rectangle((0, 0), 1, 1, color="tab:gray")]
    ax.legend(handles, [*colours, "other"], fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Rebalances per group (bar: start to end; label: partitions moved)")
    ax.set_xlabel("time (UTC)")
    if not groups:
        ax.text(0.5, 0.5, "no rebalances", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(spark, bootstrap: str, output: str, kafka: dict | None = None, quiet: bool = False, stream=None):
    """Compute, write Parquet and the PNG under ``output``, print; returns (rebalances, groups) pandas frames."""
    rebalances, groups = compute(spark, bootstrap, kafka)
    rebalances.write.mode("overwrite").parquet(ps.join(output, "rebalances"))
    groups.write.mode("overwrite").parquet(ps.join(output, "rebalance_groups"))
    rpdf = spark.read.parquet(ps.join(output, "rebalances")).orderBy("group", "seq").toPandas()
    gpdf = spark.read.parquet(ps.join(output, "rebalance_groups")).orderBy("group").toPandas()
    png = common.chart_path("rebalances.png")
    chart(rpdf, png)
    ps.write_file(spark, png, output, "rebalances.png")
    if not quiet:
        shown = rpdf.assign(
            members_joined=rpdf["members_joined"].map(len), members_left=rpdf["members_left"].map(len),
            members_expired=rpdf["members_expired"].map(len), partitions_moved=rpdf["partitions_moved"].map(lambda v: ",".join(v)),
        ).drop(columns=["reason"])
        ps.print_table("rebalances", shown, stream)
        ps.print_table("rebalances per group", gpdf, stream)
    return rpdf, gpdf


def main(argv: list[str] | None = None) -> int:
    args = common.arg_parser("python -m pipeline.rebalances", "Rebalances per group, from kafkalite's group event stream.").parse_args(argv)
    spark = ps.session(args.master, "kafkalite-rebalances")
    try:
        run(spark, args.bootstrap, args.output, common.kafka_settings(args.kafka_option), args.quiet)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
