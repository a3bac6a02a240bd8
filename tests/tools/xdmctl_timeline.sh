#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_timeline.sh - xdmctl timeline draws what a log holds: on logs
# simulated by tests/tools/timeline_gen.py, which knows the true peak and each
# tag's bytes without reading the CSV back, the SVG's data- attributes
# must give exactly those figures, name every tag (a comma, quotes, XML's
# specials, a newline and non-ASCII included) and every stream, and the
# HTML page must hold the same drawing and a row per tag.  Bad logs exit 2
# naming FILE:LINE; an output that cannot be written fails with a sentence.
#
# Exit 0 pass, 1 fail, 77 skip (no xdmctl built, or no python3).  Run by
# make check with XDM_TOP_SRCDIR and XDM_TOP_BUILDDIR set; by hand from the
# build directory: XDM_TOP_SRCDIR=../.. sh ../../tests/tools/xdmctl_timeline.sh

set -u

name_of_test=xdmctl_timeline
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_log_test.sh"

# ---- the figures: a few tags, then more than get a band each -------------
# many.csv has 20 tags: past 15 the smallest share the "other" band.
"$python" "$gen" "$tmp/few.csv" "$tmp/few.json" --rows 3000 --tags 6 --seed 3 ||
	fail "timeline_gen.py could not write few.csv"
"$python" "$gen" "$tmp/many.csv" "$tmp/many.json" --rows 3000 --tags 20 --seed 4 ||
	fail "timeline_gen.py could not write many.csv"

for log in few many; do
	run "$log.svg" timeline "$tmp/$log.csv"
	[ "$rc" -eq 0 ] || fail "timeline $log.csv exited $rc"
	[ -s "$tmp/err.$log.svg" ] && fail "timeline $log.csv wrote to stderr"
	run "$log.stream.svg" timeline --by stream --top 2 "$tmp/$log.csv"
	[ "$rc" -eq 0 ] || fail "timeline --by stream $log.csv exited $rc"
	run "$log.html.out" timeline --html -o "$tmp/$log.html" --width 900 "$tmp/$log.csv"
	[ "$rc" -eq 0 ] || fail "timeline --html -o $log.csv exited $rc"
	[ -s "$tmp/$log.html.out" ] && fail "timeline -o $log.html also wrote on stdout"

	"$python" - "$tmp/$log.json" "$tmp/$log.svg" "$tmp/$log.stream.svg" "$tmp/$log.html" <<'PY' ||
import json
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
facts_path, svg_path, stream_path, html_path = sys.argv[1:]
with open(facts_path, encoding="utf-8") as f:
    facts = json.load(f)


def check(cond, what):
    if not cond:
        print("FAIL: %s: %s" % (svg_path, what), file=sys.stderr)
        sys.exit(1)


def keyed(root):
    """{key: element} of every tag or stream: bands, and the keys in "other"."""
    out = {}
    for g in root.iter(SVG + "g"):
        if g.get("class") == "series" and g.get("data-other") is None or \
           g.get("class") == "member":
            key = g.get("data-key")
            check(key not in out, "%r drawn twice" % key)
            out[key] = g
    return out


def check_peak(root, per_key_at_peak):
    peak = root.find(".//%sg[@id='peak']" % SVG)
    check(peak is not None, "no <g id='peak'>")
    check(int(peak.get("data-bytes")) == facts["peak_bytes"],
          "peak %s bytes, the program's was %d" % (peak.get("data-bytes"), facts["peak_bytes"]))
    check(int(peak.get("data-time-ns")) == facts["peak_time_ns"],
          "peak at %s ns, the program's at %d" % (peak.get("data-time-ns"), facts["peak_time_ns"]))
    # The keys named at the peak are the largest there, largest first.
    named = [(t.get("data-key"), int(t.get("data-bytes")))
             for t in peak.iter(SVG + "text") if t.get("class") == "peak-key"]
    check(named, "no key named at the peak")
    for key, b in named:
        check(per_key_at_peak.get(key) == b, "peak names %r with %d bytes" % (key, b))
    check([b for _, b in named] == sorted((b for b in per_key_at_peak.values() if b),
                                          reverse=True)[:len(named)],
          "the keys named at the peak are not its largest: %r" % named)
    return named


# By tag: every tag, each with the program's own figures.
root = ET.parse(svg_path).getroot()
check(root.tag == SVG + "svg", "the root is %r, not svg" % root.tag)
check(int(root.get("data-rows")) == facts["rows"], "data-rows %s" % root.get("data-rows"))
tags = keyed(root)
check(sorted(tags) == sorted(facts["tags"]),
      "tags %r, the log has %r" % (sorted(tags), sorted(facts["tags"])))
for tag, g in tags.items():
    check(int(g.get("data-peak-bytes")) == facts["at_peak"][tag],
          "%r: %s bytes at the peak, not %d" % (tag, g.get("data-peak-bytes"), facts["at_peak"][tag]))
    check(int(g.get("data-max-bytes")) == facts["tag_max"][tag],
          "%r: own maximum %s, not %d" % (tag, g.get("data-max-bytes"), facts["tag_max"][tag]))
    check(int(g.get("data-failures")) == facts["failures"][tag],
          "%r: %s allocate failures, not %d" % (tag, g.get("data-failures"), facts["failures"][tag]))
named = check_peak(root, facts["at_peak"])
check(len(named) == min(5, sum(1 for b in facts["at_peak"].values() if b)),
      "%d keys named at the peak, --top is 5" % len(named))
bands = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
# Columns hold the highest moment of their time: the top of the stack
# touches the peak, exactly (to the tenth of a pixel the paths are in).
axis = root.find(".//%sg[@id='bytes-axis']" % SVG)
ticks = list(zip((float(l.get("y1")) for l in axis.iter(SVG + "line")),
                 (int(t.get("data-bytes")) for t in axis.iter(SVG + "text"))))
(y0, _), (yk, bk) = ticks[0], ticks[-1]
want = y0 - facts["peak_bytes"] * (y0 - yk) / bk
tops = [float(v) for g in bands for p in g.iter(SVG + "path")
        for v in re.findall(r"[MV](?:[-0-9.]+,)?([-0-9.]+)", p.get("d"))]
check(abs(min(tops) - want) <= 0.051, "the stack tops out at y %.1f, the peak is at %.1f"
      % (min(tops), want))
failures = root.find(".//%sg[@id='failures']" % SVG)
check(int(failures.get("data-count")) == sum(facts["failures"].values()),
      "failures %s" % failures.get("data-count"))
other = [g for g in bands if g.get("data-other") is not None]
if len(facts["tags"]) > 16:
    check(len(bands) == 16 and len(other) == 1, "%d bands, %d other" % (len(bands), len(other)))
    check(int(other[0].get("data-other")) == len(facts["tags"]) - 15,
          "other holds %s tags" % other[0].get("data-other"))
else:
    check(len(bands) == len(facts["tags"]) and not other, "%d bands for %d tags"
          % (len(bands), len(facts["tags"])))

# By stream: every stream, and together they hold the peak.
svg_path = stream_path
root = ET.parse(stream_path).getroot()
check(root.get("data-by") == "stream", "data-by %r" % root.get("data-by"))
streams = keyed(root)
check(sorted(streams) == sorted(facts["streams"]),
      "streams %r, the log has %r" % (sorted(streams), facts["streams"]))
at_peak = {k: int(g.get("data-peak-bytes")) for k, g in streams.items()}
check(sum(at_peak.values()) == facts["peak_bytes"], "the streams hold %d at the peak, not %d"
      % (sum(at_peak.values()), facts["peak_bytes"]))
check(len(check_peak(root, at_peak)) <= 2, "more keys named at the peak than --top 2")

# The page: well-formed, the same drawing inline, a row per tag.
svg_path = html_path
page = ET.parse(html_path).getroot()
svgs = list(page.iter(SVG + "svg"))
check(len(svgs) == 1, "%d drawings in the page" % len(svgs))
check(svgs[0].get("width") == "900", "--width 900 gave %r" % svgs[0].get("width"))
check_peak(svgs[0], facts["at_peak"])
rows = {tr.get("data-key"): tr for tr in page.iter("tr") if tr.get("class") == "key"}
check(sorted(rows) == sorted(facts["tags"]), "table rows %r" % sorted(rows))
for tag, tr in rows.items():
    cells = tr.findall("td")
    check(int(cells[1].get("data-bytes")) == facts["at_peak"][tag], "%r at the peak" % tag)
    check(int(cells[2].get("data-bytes")) == facts["tag_max"][tag], "%r own maximum" % tag)
    check(int(cells[5].text) == facts["failures"][tag], "%r allocate failures" % tag)
PY
		fail "the drawing of $log.csv is wrong (above)"
done

# ---- a log with no rows: an empty chart that says so ---------------------
head -n 1 "$tmp/few.csv" >"$tmp/empty.csv"
run empty.svg timeline "$tmp/empty.csv"
[ "$rc" -eq 0 ] || fail "timeline of a header-only log exited $rc, not 0"
"$python" - "$tmp/empty.svg" <<'PY' || fail "the drawing of an empty log is wrong (above)"
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
peak = root.find(".//%sg[@id='peak']" % SVG)
said = " ".join(t.text or "" for t in root.iter(SVG + "text"))
if peak is None or peak.get("data-bytes") != "0" or "no rows" not in said:
    print("FAIL: no zero peak or no sentence in %s" % sys.argv[1], file=sys.stderr)
    sys.exit(1)
PY

# ---- what XML cannot hold: a control character and a byte that is not UTF-8
printf '%s\n1,10,allocate,0x1000,256,0,0,a\001b\377c,0\n' "$(head -n 1 "$tmp/few.csv")" \
	>"$tmp/bytes.csv"
run bytes.svg timeline "$tmp/bytes.csv"
[ "$rc" -eq 0 ] || fail "timeline of a tag with raw bytes exited $rc"
"$python" - "$tmp/bytes.svg" <<'PY' || fail "a tag with raw bytes is drawn wrong (above)"
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
keys = [g.get("data-key") for g in ET.parse(sys.argv[1]).getroot().iter(SVG + "g")
        if g.get("class") == "series"]
if keys != ["a\ufffdb\ufffdc"]:
    print("FAIL: the tag a\\001b\\377c became %r, not a U+FFFD b U+FFFD c" % keys, file=sys.stderr)
    sys.exit(1)
PY

# ---- bad logs: exit 2, one sentence naming FILE:LINE, nothing drawn ------
header=$(head -n 1 "$tmp/few.csv")
{ echo "thread,time,action"; tail -n +2 "$tmp/few.csv"; } >"$tmp/bad_header.csv"
printf '%s\n1,10,allocate,0x1000,256,0,0,t,0\n1,12x,allocate,0x2000,256,0,0,t,0\n' "$header" \
	>"$tmp/bad_field.csv"
# A quoted newline in a tag: the line after it is still counted right.
printf '%s\n1,10,allocate,0x1000,256,0,0,"two\nlines",0\n2,11,free,0x3000,256,0,0,t,0\n' \
	"$header" >"$tmp/bad_free.csv"
printf '%s\n1,10,allocate,0x1000,256,0,0,t,0\n1,11,free,0x1000,256,0,0,t,0\n1,12,allocate,0x10' \
	"$header" >"$tmp/bad_cut.csv"
for bad in bad_header.csv:1 bad_field.csv:3 bad_free.csv:4 bad_cut.csv:4; do
	file=${bad%:*}
	run bad timeline "$tmp/$file"
	[ "$rc" -eq 2 ] || fail "timeline $file exited $rc, not 2"
	grep -q "^xdmctl: timeline: $tmp/$bad: " "$tmp/err.bad" ||
		fail "timeline $file does not name $bad: $(cat "$tmp/err.bad")"
	[ "$(wc -l <"$tmp/err.bad")" -eq 1 ] || fail "timeline $file said more than one line"
	[ -s "$tmp/bad" ] && fail "timeline $file drew something on stdout"
done
run bad timeline -o "$tmp/bad.svg" "$tmp/bad_free.csv"
[ "$rc" -eq 2 ] && [ ! -e "$tmp/bad.svg" ] || fail "a bad log left $tmp/bad.svg behind (exit $rc)"

# ---- a log with losses (logging full=drop): "dropped" rows ---------------
# They are read, not drawn: a lossy log that still adds up draws; one whose
# free lost its allocate says so, naming the loss.
printf '%s\n1,10,allocate,0x1000,256,0,0,t,0\n1,11,dropped,0x0,3,0,0,,0\n1,12,free,0x1000,256,0,0,t,0\n' \
	"$header" >"$tmp/lossy.csv"
run lossy.svg timeline "$tmp/lossy.csv"
[ "$rc" -eq 0 ] || fail "timeline of a log with a dropped row exited $rc"
[ -s "$tmp/err.lossy.svg" ] && fail "timeline of a log with a dropped row wrote to stderr"
printf '%s\n1,10,dropped,0x0,1,0,0,,0\n1,12,free,0x1000,256,0,0,t,0\n' "$header" \
	>"$tmp/lossy_free.csv"
run bad timeline "$tmp/lossy_free.csv"
[ "$rc" -eq 2 ] || fail "timeline of a lossy log that cannot add up exited $rc, not 2"
grep -q "^xdmctl: timeline: $tmp/lossy_free.csv:3: .*1 rows were dropped" "$tmp/err.bad" ||
	fail "the complaint does not name the loss: $(cat "$tmp/err.bad")"
printf '%s\n1,10,dropped,0x10,1,0,0,,0\n' "$header" >"$tmp/bad_mark.csv"
run bad timeline "$tmp/bad_mark.csv"
[ "$rc" -eq 2 ] || fail "timeline of a malformed dropped row exited $rc, not 2"

# ---- an output that cannot be written: a sentence naming it --------------
run nodir timeline -o "$tmp/no/such/dir/t.svg" "$tmp/few.csv"
[ "$rc" -eq 1 ] || fail "-o into a missing directory exited $rc, not 1"
grep -q "cannot write $tmp/no/such/dir/t.svg: " "$tmp/err.nodir" ||
	fail "-o into a missing directory: $(cat "$tmp/err.nodir")"

# ---- saying no to a bad command line ------------------------------------
for args in "" "--by thread $tmp/few.csv" "--width 10 $tmp/few.csv" "--top x $tmp/few.csv" \
	    "--nope $tmp/few.csv" "$tmp/few.csv $tmp/many.csv" "$tmp/few.csv --height"; do
	# shellcheck disable=SC2086 # split on purpose
	run usage timeline $args
	[ "$rc" -eq 2 ] || fail "timeline $args exited $rc, not 2"
	[ -s "$tmp/err.usage" ] || fail "timeline $args said nothing on stderr"
done
run help timeline --help
[ "$rc" -eq 0 ] && grep -q -- '--by tag|stream' "$tmp/help" || fail "timeline --help"

echo "PASS: xdmctl timeline"
exit 0
