"""The nesting of a thread's complete events: each event's parent, and the lanes of events that
overlap without nesting (a thread's "(overlap N)" threads in the trace file)."""

from __future__ import annotations

import numpy as np

#: The end of an event that never ended, in `assign_lanes`.
_INFINITY = 1 << 63
#: Events of a thread taken at a time by the nesting pass.
_NEST_SLICE = 1 << 16


#: Events that must nest in a row before the nesting pass tries numpy again after one that does not.
_NEST_RUN = 64


#: The end of an event that never ended, in the staged columns.
OPEN = 2**63 - 1


def nest_by_owner(owners: list[int], starts: list[int], ends: list[int]) -> tuple[np.ndarray, set[int]]:
    """Parent position of each event (ordered by owner, start, longest first) within its owner's
    events, as lane 0 of `nest` places them; and the owners with events that do not nest there."""
    parents = [-1] * len(owners)
    overlapping: set[int] = set()
    stack_ends: list[int] = []
    stack_positions: list[int] = []
    current = -1
    for k, (owner, s, e) in enumerate(zip(owners, starts, ends)):
        if owner != current:
            current = owner
            stack_ends.clear()
            stack_positions.clear()
        while stack_ends and stack_ends[-1] <= s:
            stack_ends.pop()
            stack_positions.pop()
        if stack_ends:
            if e > stack_ends[-1]:
                overlapping.add(owner)
            parents[k] = stack_positions[-1]
        stack_ends.append(e)
        stack_positions.append(k)
    return np.array(parents, dtype=np.int64), overlapping


def nested_prefix(
    starts: np.ndarray, ends: np.ndarray, parents: np.ndarray, first: int, chain: list[int], size: int
) -> tuple[int, list[int]]:
    """Fill in `parents` (positions) for the events (by start, longest first) from `first` up to
    the next one that does not nest in lane 0, whose open events are `chain` (positions, outermost
    first); return where it stopped and the open events then. `size` is the first slice's length.

    While events nest, each one's parent is the last earlier event still open at its start (ending
    after it): found for a slice of events at a time by halving jumps back over events that ended,
    with the latest end of each run of 2**k events at hand, or else among the events open when the
    slice began.
    """
    count = len(starts)
    size = min(_NEST_SLICE, size)
    while first < count:
        stop = min(count, first + size)
        start = starts[first:stop]
        end = ends[first:stop]
        runs = [end]  # runs[k][x]: the latest end of events x - 2**k + 1 ... x of the slice
        width = 1
        while width * 2 <= stop - first:
            longer = runs[-1].copy()
            longer[width:] = np.maximum(runs[-1][width:], runs[-1][:-width])
            runs.append(longer)
            width *= 2
        found = np.arange(-1, stop - first - 1, dtype=np.int64)
        for k in range(len(runs) - 1, -1, -1):
            jump = 1 << k
            inside = found >= jump - 1
            ended = inside & (runs[k][np.where(inside, found, 0)] <= start)
            found -= np.where(ended, jump, 0)
        parent = np.where(found >= 0, found + first, -1)
        if chain:
            outer_positions = np.array(chain, dtype=np.int64)
            open_count = np.searchsorted(-ends[outer_positions], -start, side="left")  # ends fall along the chain
            outer = np.where(open_count > 0, outer_positions[np.maximum(open_count - 1, 0)], -1)
            parent = np.where(found >= 0, parent, outer)
        misfit = np.flatnonzero((parent >= 0) & (end > ends[np.maximum(parent, 0)]))
        done = first + (int(misfit[0]) if misfit.size else stop - first)
        parents[first:done] = parent[: done - first]
        if done > first:
            chain = []
            position = done - 1
            while position >= 0:
                chain.append(position)
                position = int(parents[position])
            chain.reverse()
        if done < stop:
            return done, chain
        first = stop
        size = min(_NEST_SLICE, size * 2)
    return count, chain


def nest(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lane and parent position of each event, the events in order by start, longest first:
    each goes to the first lane where it nests inside the innermost event still open (or where
    none is open), its parent that event. Runs of events that nest in lane 0 are placed by
    `nested_prefix`, the others one at a time."""
    count = len(starts)
    lanes = np.zeros(count, dtype=np.int64)
    parents = np.empty(count, dtype=np.int64)
    others: list[list[tuple[int, int]]] = []  # lanes 1, 2, ...: (end, position) of open events
    chain: list[int] = []  # lane 0's open events, outermost first
    done = 0
    size = 1 << 12
    while done < count:
        placed, chain = nested_prefix(starts, ends, parents, done, chain, size)
        run = placed - done
        done = placed
        if done == count:
            break
        if run >= _NEST_RUN:  # an event that does not nest now and then: place it, then runs again
            stop = done + 1
            size = max(_NEST_RUN * 4, 2 * run)
        else:  # frequent ones: a slice one at a time
            stop = min(count, done + _NEST_SLICE)
            size = 1 << 12
        chain = _place_one_at_a_time(starts, ends, parents, lanes, done, stop, chain, others)
        done = stop
    return lanes, parents


def _place_one_at_a_time(
    starts: np.ndarray,
    ends: np.ndarray,
    parents: np.ndarray,
    lanes: np.ndarray,
    first: int,
    stop: int,
    chain: list[int],
    others: list[list[tuple[int, int]]],
) -> list[int]:
    """Place events `first` to `stop` as `nest` says, lane 0's open events being `chain`; return
    lane 0's open events after them."""
    top_ends: list[int] = [OPEN, *ends[chain].tolist()]  # over a root that never ends
    top_positions: list[int] = [-1, *chain]
    pop_end = top_ends.pop
    pop_position = top_positions.pop
    push_end = top_ends.append
    push_position = top_positions.append
    never = OPEN
    found: list[int] = []
    record = found.append
    for i, (s, e) in enumerate(zip(starts[first:stop].tolist(), ends[first:stop].tolist()), first):
        top = top_ends[-1]
        while top <= s:  # ends of events never ended (and of the root) are above every start
            pop_end()
            pop_position()
            top = top_ends[-1]
        if e <= top:
            record(top_positions[-1])
            push_end(e)
            push_position(i)
            continue
        lane = 1
        for stack in others:
            while stack and stack[-1][0] <= s and stack[-1][0] != never:
                stack.pop()
            if not stack or e <= stack[-1][0]:
                break
            lane += 1
        else:
            stack = []
            others.append(stack)
        record(stack[-1][1] if stack else -1)
        stack.append((e, i))
        lanes[i] = lane
    parents[first:stop] = found
    return top_positions[1:]


def free_tid(pid: int, tid: int, lane: int, used: set) -> int:
    candidate = tid + lane * (1 << 32)
    while (pid, candidate) in used or not -(1 << 63) <= candidate < (1 << 63):
        candidate = (candidate + 1) % (1 << 62)
    used.add((pid, candidate))
    return candidate


def assign_lanes(starts: list[int], ends: list[int]) -> list[int]:
    """A lane (0, 1, ...) for each interval so that the intervals of one lane nest properly.

    Intervals are taken by start, longest first, as formats.trace.writer.nest_events does, and
    each goes to the first lane where it fits inside the innermost interval still open (or
    where none is open). Lane 0 gets every interval when they already nest.
    """
    order = sorted(range(len(starts)), key=lambda k: (starts[k], -ends[k], k))
    stacks: list[list[int]] = []
    lanes = [0] * len(starts)
    for k in order:
        s, e = starts[k], ends[k]
        for lane, stack in enumerate(stacks):
            while stack and ends[stack[-1]] <= s and ends[stack[-1]] != _INFINITY:
                stack.pop()
            if not stack or e <= ends[stack[-1]]:
                stack.append(k)
                lanes[k] = lane
                break
        else:
            stacks.append([k])
            lanes[k] = len(stacks) - 1
    return lanes
