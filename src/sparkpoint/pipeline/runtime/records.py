"""What moves through an epoch (docs/architecture.md §7), named by kind.

Into the backend's epoch task goes the union of two pair RDDs, ``(key, element)``:
``(Record, order, value)`` for each of the epoch's records and ``(State, entry)`` for each
element of the state RDD. Out of it comes one stream of ``(NewState, key, entry)``,
``(Output, timestamp, value)`` and ``(Counts, index, (processed, maxima))``.

Each element is a plain tuple whose first item is one of the classes below, and code
tells the kinds apart with ``element[0] is Record``. Why not an instance of a class per
kind: every element crosses PySpark's pickling between the JVM and Python, and
cloudpickle calls back into Python for every object that is not a builtin container (a
reduce on the way out, a ``__new__`` on the way in), which costs far more than a few
percent; a class inside a plain tuple is pickled once per batch and then referenced by
its memo slot, as cheaply as the small ints it stands for.
"""

from __future__ import annotations

from typing import Any


class Record:
    """``(Record, order, value)``: one record of the epoch, the value side of a
    ``(key, …)`` pair. ``order`` is ``(split, position, …)`` (runtime/tasks.py's ReadTask)
    or, in a later keyed stage, ``(timestamp, partition, n)``; the backend's epoch task
    sorts the records of its partition by it before the keyed function sees them."""

    __slots__ = ()


class State:
    """``(State, entry)``: one element of the state RDD on its way into an epoch task
    (the value side of a ``(key, …)`` pair): a key's entry, a subtask's operator state
    (key ``Slot(i)``) or, on the on-disk backend, its store token."""

    __slots__ = ()


class NewState:
    """``(NewState, key, entry)``: state after the epoch, which becomes the next state
    RDD's ``(key, entry)`` (runtime/tasks.py's only_state)."""

    __slots__ = ()


class Output:
    """``(Output, timestamp, value)``: what the keyed function emitted, with the event
    time it carries (or None); a ``SideOutput`` value goes to its side output's sink, any
    other to the stages after the function and then the sink, or the next keyed stage."""

    __slots__ = ()


class Counts:
    """``(Counts, index, (processed, maxima))``: subtask ``index``'s number of records
    processed and, per source split, the largest event time seen; the sink task adds
    them up for the driver."""

    __slots__ = ()


#: An element out of an epoch task: ``(NewState | Output | Counts, a, b)``.
Result = tuple[type, Any, Any]


def as_state(entry: Any) -> tuple[type[State], Any]:
    """A state RDD's value as it enters the union (for ``mapValues``)."""
    return State, entry


def as_record(item: tuple[Any, Any]) -> tuple[type[Record], Any, Any]:
    """A keyed ``(order, value)`` as it enters the union (for ``mapValues``)."""
    return Record, item[0], item[1]


def as_output(item: tuple[Any, Any]) -> tuple[type[Output], None, Any]:
    """An ``(order, value)`` out of a DataFrame stage after the keyed function: an output
    without a timestamp."""
    return Output, None, item[1]
