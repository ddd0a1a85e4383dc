"""A binary min-heap on a plain list: push, pop, heapify and the k smallest items."""


def _sift_up(heap, i):
    while i > 0:
        parent = (i - 1) // 2
        if heap[i] < heap[parent]:
            heap[i], heap[parent] = heap[parent], heap[i]
            i = parent
        else:
            break


def _sift_down(heap, i):
    n = len(heap)
    while True:
        left, right, smallest = 2 * i + 1, 2 * i + 2, i
        if left < n and heap[left] < heap[smallest]:
            smallest = left
        if right < n and heap[right] < heap[smallest]:
            smallest = right
        if smallest == i:
            return
        heap[i], heap[smallest] = heap[smallest], heap[i]
        i = smallest


def push(heap, item):
    """Add `item` keeping the heap property."""
    heap.append(item)
    _sift_up(heap, len(heap) - 1)


def pop(heap):
    """Remove and return the smallest item."""
    if not heap:
        raise IndexError("pop from an empty heap")
    last = heap.pop()
    if not heap:
        return last
    smallest, heap[0] = heap[0], last
    _sift_down(heap, 0)
    return smallest


def heapify(items):
    """A new list holding `items` as a heap."""
    heap = list(items)
    for i in range(len(heap) // 2 - 1, -1, -1):
        _sift_down(heap, i)
    return heap


def nsmallest(items, k):
    """The `k` smallest items in ascending order."""
    heap = heapify(items)
    return [pop(heap) for _ in range(min(k, len(heap)))]


def is_heap(heap):
    """Whether every parent is at most its children."""
    return all(heap[(i - 1) // 2] <= heap[i] for i in range(1, len(heap)))
