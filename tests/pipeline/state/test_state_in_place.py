"""State is never shuffled: each epoch unions the state RDD with the keyed records
partition by partition, and a state RDD rebuilt from snapshot files carries the same
partitioner without moving state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver, Slot
from tests.pipeline import support


def _dependencies(jrdd: Any) -> list[Any]:
    deps = jrdd.dependencies()
    return [deps.apply(i) for i in range(deps.size())]


def _is_shuffle(dep: Any) -> bool:
    return dep.getClass().getName() == "org.apache.spark.ShuffleDependency"


def _first_shuffle_below(jrdd: Any) -> Any:
    """The RDD on the map side of the nearest shuffle below ``jrdd`` (narrow steps only
    in between), or None when its lineage has no shuffle."""
    for dep in _dependencies(jrdd):
        if _is_shuffle(dep):
            return dep.rdd()
        below = _first_shuffle_below(dep.rdd())
        if below is not None:
            return below
    return None


def test_state_joins_records_without_a_shuffle(spark: Any, tmp_path: Path) -> None:
    p = support.pipeline("in-place", tmp_path / "out", parallelism=4)
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=10)
    driver = PipelineDriver(p, spark, channel)
    driver.start()
    # Epoch 1 starts from the (empty) restored state, later epochs from cached state,
    # and at least one epoch follows a checkpoint (state re-read from files).
    driver.run(max_epochs=4)
    assert driver.status.acknowledged, "no checkpoint was taken"
    union = driver.last_union
    assert union is not None
    junion = union._jrdd.rdd()
    assert junion.getClass().getSimpleName() == "PartitionerAwareUnionRDD"
    deps = _dependencies(junion)
    assert len(deps) == 2
    assert not any(_is_shuffle(d) for d in deps), "the union must be narrow on both sides"

    # Under the state side, the only shuffle is that of the P marker records that give a
    # state RDD read from files its partitioner: state itself never crosses it.
    state_side = deps[0].rdd()
    map_side = _first_shuffle_below(state_side)
    assert map_side is not None
    assert map_side.count() == p.parallelism

    # And every key of the cached state sits in the partition the partitioner names.
    assert driver.state is not None
    for index, part in enumerate(driver.state.glom().collect()):
        for key, _ in part:
            assert driver.partitioner(key) == index
            if isinstance(key, Slot):
                assert key.index == index
    driver.close()


def test_one_partitioner_object_keeps_rdds_co_partitioned(spark: Any) -> None:
    """Why the driver keeps ONE partitioner: PySpark identifies the JVM partitioner by
    the function object's id, so an equal second instance makes Spark shuffle again."""
    from sparkpoint.pipeline import KeyGroupPartitioner

    sc = spark.sparkContext
    pairs = [(f"user-{i}", i) for i in range(40)]
    one = KeyGroupPartitioner(4, 128)
    a = sc.parallelize(pairs, 2).partitionBy(4, one)
    b = sc.parallelize(pairs, 2).partitionBy(4, one)
    same = a.mapValues(lambda v: v).union(b.mapValues(lambda v: v))
    assert same._jrdd.rdd().getClass().getSimpleName() == "PartitionerAwareUnionRDD"
    c = sc.parallelize(pairs, 2).partitionBy(4, KeyGroupPartitioner(4, 128))
    other = a.mapValues(lambda v: v).union(c.mapValues(lambda v: v))
    assert other._jrdd.rdd().getClass().getSimpleName() == "UnionRDD"


def test_lineage_stays_bounded_without_checkpoints(spark: Any, tmp_path: Path) -> None:
    """Without snapshots every epoch would add to the lineage (a StackOverflowError
    after ~100 epochs); past ``lineage_limit`` epochs it is cut."""
    p = support.pipeline("lineage", tmp_path / "out", parallelism=2, records_per_epoch=40)
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=3_600_000)
    driver = PipelineDriver(p, spark, channel, lineage_limit=3)
    driver.start()
    depths = []
    for _ in range(9):
        driver.run(max_epochs=1)
        assert driver.state is not None
        driver.state.count()  # materialise (and cut, when marked)
        depths.append(len(driver.state.toDebugString().splitlines()))
    driver.close()
    assert not driver.status.acknowledged
    assert max(depths[3:]) <= max(depths[:3]), depths
