#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""timeline_gen.py - writes a logging adaptor CSV (xdm-logging(7)) for the
xdmctl timeline and snapshot tests, and what a reader must find in it.

    timeline_gen.py LOG.csv FACTS.json [--rows N] [--tags N] [--seed S]

The program is simulated here, one event at a time, so the facts come
from the simulation, not from reading the CSV back: the true peak of live
bytes and its moment, each tag's own maximum and its bytes at the peak,
each stream, the allocate failures.  The CSV is then written the way the
adaptor writes it: each thread's rows in the order of its calls, the
threads' buffers reaching the file in chunks, interleaved in any order.
Some frees and allocations of different threads share a timestamp, and
an address freed by one thread is handed to another at the same time:
the reader's merge must put the free first (xdm-logging(7), "Order and
replay") to see what the program saw.
"""
import argparse
import json
import random
import sys

HEADER = "thread,time,action,ptr,bytes,stream,device,tag,query_id"

# Tags a reader must carry through: a comma and quotes (quoted in the
# CSV), XML's specials, a newline, and text beyond ASCII.
SPECIAL_TAGS = ['a,b "q"', "x&y<z>'", "two\nlines", "gr\u00fc\u00dfe"]


def csv_field(s):
    if any(c in s for c in ',"\r\n'):
        return '"' + s.replace('"', '""') + '"'
    return s


def simulate(rows, ntags, seed):
    rnd = random.Random(seed)
    tags = SPECIAL_TAGS + ["tag%02d" % i for i in range(max(0, ntags - len(SPECIAL_TAGS)))]
    tags = tags[:ntags]
    threads = [1000 + i for i in range(4)]
    streams = [0, 1, 2, 7]
    t = 1_700_000_000_000_000_000
    next_ptr = 0x7f0000000000
    free_ptrs = []              # addresses given back, reused by later allocations
    live = {}                   # ptr -> (bytes, tag, stream, thread)
    live_list = []              # the same addresses, to draw one in O(1)
    live_at = {}                # ptr -> its index in live_list
    per_thread = {th: [] for th in threads}
    total = 0
    tag_live = {tg: 0 for tg in tags}
    tag_max = {tg: 0 for tg in tags}
    failures = {tg: 0 for tg in tags}
    peak = None                 # (bytes, time, {tag: bytes})
    n = 0

    def emit(th, time, action, ptr, nbytes, stream, tag):
        per_thread[th].append((time, action, ptr, nbytes, stream, tag))

    def take(ptr, entry):
        live[ptr] = entry
        live_at[ptr] = len(live_list)
        live_list.append(ptr)

    def give_back(ptr):
        i = live_at.pop(ptr)
        last = live_list.pop()
        if last != ptr:
            live_list[i] = last
            live_at[last] = i
        return live.pop(ptr)

    while n < rows:
        t += rnd.choice((1, 1000, 50_000, 2_000_000))
        r = rnd.random()
        th = rnd.choice(threads)
        # Grow for a while, then shrink: a few clear humps and one highest.
        growing = (n // max(1, rows // 6)) % 2 == 0
        if live and (r < 0.35 or (not growing and r < 0.7)):
            ptr = rnd.choice(live_list)
            nbytes, tag, stream, _ = give_back(ptr)
            total -= nbytes
            tag_live[tag] -= nbytes
            action = "free" if rnd.random() > 0.02 else "free_failure"
            emit(th, t, action, ptr, nbytes, stream, tag)
            n += 1
            free_ptrs.append(ptr)
            # Another thread takes the address at the same instant.
            if free_ptrs and rnd.random() < 0.1 and n < rows:
                other = rnd.choice([x for x in threads if x != th])
                free_ptrs.pop()
                tag = rnd.choice(tags)
                stream = rnd.choice(streams)
                take(ptr, (nbytes, tag, stream, other))
                total += nbytes
                tag_live[tag] += nbytes
                tag_max[tag] = max(tag_max[tag], tag_live[tag])
                emit(other, t, "allocate", ptr, nbytes, stream, tag)
                n += 1
                if peak is None or total > peak[0]:
                    peak = (total, t, dict(tag_live))
            continue
        tag = rnd.choice(tags)
        stream = rnd.choice(streams)
        nbytes = rnd.choice((256, 4096, 65536, 1 << 20, 3 << 20, 17 << 20)) + rnd.randrange(0, 512)
        if r > 0.97:
            emit(th, t, "allocate_failure", 0, nbytes << 10, stream, tag)
            failures[tag] += 1
            n += 1
            continue
        if free_ptrs and rnd.random() < 0.5:
            i = rnd.randrange(len(free_ptrs))
            free_ptrs[i], free_ptrs[-1] = free_ptrs[-1], free_ptrs[i]
            ptr = free_ptrs.pop()
        else:
            ptr = next_ptr
            next_ptr += 1 << 26
        take(ptr, (nbytes, tag, stream, th))
        total += nbytes
        tag_live[tag] += nbytes
        tag_max[tag] = max(tag_max[tag], tag_live[tag])
        emit(th, t, "allocate", ptr, nbytes, stream, tag)
        n += 1
        if peak is None or total > peak[0]:
            peak = (total, t, dict(tag_live))

    return {
        "threads": threads,
        "per_thread": per_thread,
        "tags": tags,
        "streams": sorted({e[4] for rs in per_thread.values() for e in rs}),
        "peak": peak,
        "tag_max": tag_max,
        "failures": failures,
        "live_end": total,
        "live_blocks": len(live),
        "rnd": rnd,
    }


def write_csv(path, sim):
    rnd = sim["rnd"]
    # Chunks of each thread, in order per thread, interleaved at random.
    rows = sim["per_thread"]
    done = {th: 0 for th in rows}
    quoted = {tag: csv_field(tag) for tag in sim["tags"]}
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(HEADER + "\n")
        left = [th for th in rows if rows[th]]
        while left:
            th = rnd.choice(left)
            k = rnd.randint(1, 64)
            chunk = rows[th][done[th]:done[th] + k]
            done[th] += len(chunk)
            if done[th] == len(rows[th]):
                left.remove(th)
            f.write("".join("%d,%d,%s,0x%x,%d,%d,0,%s,%d\n"
                            % (th, time, action, ptr, nbytes, stream, quoted[tag], th % 3)
                            for time, action, ptr, nbytes, stream, tag in chunk))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("facts")
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--tags", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.tags < 1:
        sys.exit("timeline_gen.py: --tags must be at least 1")
    sim = simulate(a.rows, a.tags, a.seed)
    write_csv(a.log, sim)
    peak_bytes, peak_time, at_peak = sim["peak"]
    facts = {
        "rows": sum(len(r) for r in sim["per_thread"].values()),
        "tags": sim["tags"],
        "streams": [str(s) for s in sim["streams"]],
        "peak_bytes": peak_bytes,
        "peak_time_ns": peak_time,
        "at_peak": at_peak,
        "tag_max": sim["tag_max"],
        "failures": sim["failures"],
        "live_end": sim["live_end"],
        "live_blocks": sim["live_blocks"],
        "allocations": sum(1 for rs in sim["per_thread"].values() for e in rs
                           if e[1] == "allocate"),
        "frees": sum(1 for rs in sim["per_thread"].values() for e in rs
                     if e[1] in ("free", "free_failure")),
    }
    with open(a.facts, "w", encoding="utf-8") as f:
        json.dump(facts, f)


if __name__ == "__main__":
    main()
