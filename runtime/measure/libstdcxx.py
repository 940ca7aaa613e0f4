"""The orders libstdc++ leaves things in, which decide TFLite's arena offsets: std::sort's for equal keys,
and the iteration order of a std::unordered_set<int>.

LiteRT's arena planner (built against libstdc++) gathers each node's tensors in an unordered_set
and sorts them with std::sort, which is not stable: tensors of equal size and first node are
placed in whatever order these leave them. std::sort follows bits/stl_algo.h and bits/stl_heap.h:
an introsort loop down to runs of 16 (median of three moved to the front, unguarded partition, a
heap sort past 2*log2(n) levels), then an insertion sort over the whole range. The set follows
bits/hashtable.h: identity hash, one singly linked list in which a key joins the front of its
bucket's run, or the front of the list when its bucket is empty, rebuilt the same way on rehash.
"""

from __future__ import annotations

from typing import Callable, MutableSequence, TypeVar

__all__ = ["cxx_sort", "unordered_set_order"]

T = TypeVar("T")
Less = Callable[[T, T], bool]
_THRESHOLD = 16  # _S_threshold


def cxx_sort(items: MutableSequence[T], less: Less) -> None:
    """Sort `items` in place as std::sort(begin, end, less) does with libstdc++."""
    n = len(items)
    if n > 1:
        _introsort(items, 0, n, 2 * (n.bit_length() - 1), less)
        _final_insertion(items, 0, n, less)


def _introsort(a, first: int, last: int, depth: int, less: Less) -> None:
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_sort(a, first, last, less)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, less)
        _introsort(a, cut, last, depth, less)
        last = cut


def _partition_pivot(a, first: int, last: int, less: Less) -> int:
    mid = first + (last - first) // 2
    _median_to_first(a, first, first + 1, mid, last - 1, less)
    return _unguarded_partition(a, first + 1, last, first, less)


def _median_to_first(a, result: int, x: int, y: int, z: int, less: Less) -> None:
    if less(a[x], a[y]):
        pick = y if less(a[y], a[z]) else z if less(a[x], a[z]) else x
    else:
        pick = x if less(a[x], a[z]) else z if less(a[y], a[z]) else y
    a[result], a[pick] = a[pick], a[result]


def _unguarded_partition(a, first: int, last: int, pivot: int, less: Less) -> int:
    while True:
        while less(a[first], a[pivot]):
            first += 1
        last -= 1
        while less(a[pivot], a[last]):
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _final_insertion(a, first: int, last: int, less: Less) -> None:
    if last - first > _THRESHOLD:
        _insertion(a, first, first + _THRESHOLD, less)
        for i in range(first + _THRESHOLD, last):
            _linear_insert(a, i, less)
    else:
        _insertion(a, first, last, less)


def _insertion(a, first: int, last: int, less: Less) -> None:
    for i in range(first + 1, last):
        if less(a[i], a[first]):
            value = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = value
        else:
            _linear_insert(a, i, less)


def _linear_insert(a, last: int, less: Less) -> None:
    value = a[last]
    while less(value, a[last - 1]):
        a[last] = a[last - 1]
        last -= 1
    a[last] = value


# -- std::__partial_sort(first, last, last): make_heap, then sort_heap ------------------------------

def _heap_sort(a, first: int, last: int, less: Less) -> None:
    n = last - first
    for parent in range((n - 2) // 2, -1, -1):
        _adjust_heap(a, first, parent, n, a[first + parent], less)
    while last - first > 1:
        last -= 1
        value = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, value, less)


def _adjust_heap(a, first: int, hole: int, length: int, value, less: Less) -> None:
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if less(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


# -- std::unordered_set<int> ----------------------------------------------------------------------

# Bucket counts an unordered_set<int> grows through when filled one key at a time (the prime rehash
# policy at load factor 1: 13 at the first insert, then the next listed prime past twice the count).
_BUCKETS = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061)


def unordered_set_order(keys) -> list[int]:
    """The iteration order of a std::unordered_set<int> after inserting `keys` in turn."""
    order: list[int] = []
    grown = 0
    for key in keys:
        if key in order:
            continue
        if len(order) + 1 > (_BUCKETS[grown - 1] if grown else 0):
            grown += 1
            order = _rehashed(order, _BUCKETS[grown - 1])
        _join(order, key, _BUCKETS[grown - 1])
    return order


def _join(order: list[int], key: int, buckets: int) -> None:
    """Insert at the front of the key's bucket run, or at the front of the list if the run is empty."""
    bucket = key % buckets
    at = next((k for k, other in enumerate(order) if other % buckets == bucket), 0)
    order.insert(at, key)


def _rehashed(order: list[int], buckets: int) -> list[int]:
    new: list[int] = []
    for key in order:
        _join(new, key, buckets)
    return new
