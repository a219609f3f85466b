"""The sequential heart of MATCH_RECOGNIZE: walking a pattern over one partition's rows.

The DEFINE conditions are evaluated for every row beforehand (vectorized,
in DuckDB) into a bit mask per row: bit i is variable i's condition. The
walk only follows those bits. A *run* is one partial match: where it
started, which pattern term it is in and how many rows that term has
taken, and the rows it took (a linked list, newest first, so extending a
run copies nothing)::

    PATTERN (A B+ C), rows r1..r4 with masks A|B, B, B|C, C

    r1: new run -> (A:1)
    r2: (A:1) -> (B:1)              new run at r2: A false, dies
    r3: (B:1) -> (B:2) greedy: B holds, so it does not move on to C
    r4: (B:2) -> C: match r1 r2 r3 r4

Quantifiers are greedy (a term that can take the row takes it and does not
also try the next term) or reluctant (both continue, as Flink's CEP does).
Matches completed by the same row are taken in order of their first row;
each emitted match ends every run that started with it, and the AFTER
MATCH SKIP strategy ends the runs that started before where matching
resumes (Flink's after-match pruning).
"""

from __future__ import annotations

from ..errors import MatchError

PAST_LAST, NEXT_ROW, TO_FIRST, TO_LAST = "PAST LAST ROW", "TO NEXT ROW", "TO FIRST", "TO LAST"

# A run: (start seq, start time, term index, rows taken by that term, path); a path is (seq, time, var, path)
# or None. Rows are ordered by (time, seq): the order they are matched in.
Run = tuple


class Matcher:
    """Walks rows through a pattern of (variable, min, max or -1, greedy) terms."""

    def __init__(self, terms: tuple[tuple[int, int, int, bool], ...], skip: str, skip_var: int,
                 within_us: int, variables: tuple[str, ...]):
        self.terms = terms
        self.skip, self.skip_var, self.within = skip, skip_var, within_us
        self.variables = variables
        # A run in term i with at least min_i rows ends the match when every later term may take none:
        # final_min[i] is that min_i, or -1 when a later term needs a row.
        self.final_min = [t[1] if all(u[1] == 0 for u in terms[i + 1:]) else -1 for i, t in enumerate(terms)]
        self._memo: dict[tuple[int, int, int], tuple] = {}
        self.cap = [max(t[1], t[2]) for t in terms]  # counts at or above this behave alike

    def moves(self, elem: int, count: int, mask: int) -> list[tuple[int, int, int]]:
        """Where a run in term ``elem`` with ``count`` rows goes with a row of ``mask``: (term, count, var)."""
        out = []
        terms, n = self.terms, len(self.terms)
        while elem < n:
            var, lo, hi, greedy = terms[elem]
            took = (hi < 0 or count < hi) and (mask >> var) & 1
            if took:
                out.append((elem, count + 1, var))
            if count < lo or (took and greedy):
                break
            elem, count = elem + 1, 0
        return out

    def _memo_moves(self, elem: int, count: int, mask: int) -> tuple[tuple[int, bool, int], ...]:
        """:meth:`moves` as (term, stays in ``elem``, var), memoized by (term, count capped, mask): the moves
        depend on the count only up to the term's bounds."""
        found = tuple((e2, e2 == elem and c2 == count + 1, v) for e2, c2, v in self.moves(elem, count, mask))
        self._memo[(elem, min(count, self.cap[elem]), mask)] = found
        return found

    def walk(self, runs: list[Run], seqs, times, masks) -> tuple[list[Run], list[tuple]]:
        """Feed one partition's rows (in time order) to its runs; returns the runs left and the matched paths.

        ``runs`` is consumed (extended in place)."""
        within, final, memo, cap, fill = self.within, self.final_min, self._memo, self.cap, self._memo_moves
        past_last = self.skip == PAST_LAST
        matched: list[tuple] = []
        for seq, t, mask in zip(seqs, times, masks):
            nxt: list[Run] = []
            done = None
            runs.append((seq, t, 0, 0, None))  # a match may start at every row
            for start, start_t, elem, count, path in runs:
                if within and t - start_t >= within:
                    continue  # Flink drops a partial match once it spans WITHIN
                c = cap[elem]
                found = memo.get((elem, count if count < c else c, mask))
                for e2, stays, var in found if found is not None else fill(elem, count, mask):
                    c2 = count + 1 if stays else 1
                    p2 = (seq, t, var, path)
                    if 0 <= final[e2] <= c2:
                        if done is None:
                            done = []
                        done.append(((start_t, start), p2))
                    else:
                        nxt.append((start, start_t, e2, c2, p2))
            if done is not None:
                if past_last:  # every run began at or before this row: the earliest match ends them all
                    matched.append(min(done, key=_first)[1])
                    nxt = []
                else:
                    nxt = self._after_match(done, nxt, (t, seq), matched)
            runs = nxt
        return runs, matched

    def _after_match(self, done, nxt, here: tuple[int, int], matched) -> list[Run]:
        """Emit the completed matches in order of their first row (time, arrival) and prune as the skip says."""
        done.sort(key=lambda d: d[0])  # stable: the first path found per start wins
        cut = None  # runs that started before this (time, seq) position are pruned
        ended = set()
        for start, path in done:
            if start in ended or (cut is not None and start < cut):
                continue
            ended.add(start)
            matched.append(path)
            if self.skip == PAST_LAST:
                cut = (here[0], here[1] + 1)  # every run so far started at or before this row
            elif self.skip != NEXT_ROW:
                target = self._target(path)
                if target is None or target == start:
                    var = self.variables[self.skip_var]
                    why = "no row is mapped to it" if target is None else "it is the match's first row"
                    raise MatchError(f"AFTER MATCH SKIP {self.skip} {var}: {why}, so matching cannot resume "
                                     "there (as in Flink); skip PAST LAST ROW or TO NEXT ROW instead")
                cut = target if cut is None else max(cut, target)
        return [r for r in nxt if (r[1], r[0]) not in ended and (cut is None or (r[1], r[0]) >= cut)]

    def _target(self, path) -> tuple[int, int] | None:
        found = None
        while path is not None:
            seq, t, var, path = path
            if var == self.skip_var:
                found = (t, seq)
                if self.skip == TO_LAST:
                    return found
        return found


def _first(done: tuple) -> tuple[int, int]:
    return done[0]


def flatten(path) -> tuple[list[int], list[int], list[int]]:
    """A path's rows, their times and their variables, oldest first."""
    seqs, times, vars_ = [], [], []
    while path is not None:
        seq, t, var, path = path
        seqs.append(seq)
        times.append(t)
        vars_.append(var)
    return seqs[::-1], times[::-1], vars_[::-1]


def unflatten(seqs: list[int], times: list[int], vars_: list[int]):
    path = None
    for seq, t, var in zip(seqs, times, vars_):
        path = (seq, t, var, path)
    return path
