#!/bin/sh
# Summarize one penguin species from the Palmer Penguins CSV.
#
# Usage: sh summarize.sh SPECIES INPUT_CSV OUTPUT_DIR
#
# Input: CSV with header
#   species,island,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g,sex,year
# where missing values are the literal NA.
#
# Output: OUTPUT_DIR/summary.json, one line:
#   {"species":"Gentoo","count":123,"mean_body_mass_g":5076.02,"mean_flipper_length_mm":217.19}
# count = rows of SPECIES with a body mass; mean_body_mass_g = mean over those rows;
# mean_flipper_length_mm = mean over rows of SPECIES with a flipper length; means rounded to
# 2 decimals. Log lines go to stdout, errors to stderr (exit status 1 for a missing input file,
# an unknown species or a header without the needed columns; 2 for a usage error).
# POSIX sh + awk only (tested with dash, mawk and gawk).

set -eu
LC_ALL=C
export LC_ALL

if [ "$#" -ne 3 ]; then
    echo "usage: sh summarize.sh SPECIES INPUT_CSV OUTPUT_DIR" >&2
    exit 2
fi

species=$1
input=$2
outdir=$3

if [ ! -f "$input" ] || [ ! -r "$input" ]; then
    echo "summarize.sh: input file not found or not readable: $input" >&2
    exit 1
fi

mkdir -p "$outdir"
tmp="$outdir/summary.json.tmp.$$"
trap 'rm -f "$tmp" "$tmp.log"' EXIT
trap 'exit 1' HUP INT TERM

# The awk program prints the JSON line to stdout and log lines to stderr so they can be
# separated here; it exits 3 when the species has no usable rows, 4 for a bad header.
status=0
SUMMARIZE_SPECIES=$species awk -F',' '
    BEGIN { species = ENVIRON["SUMMARIZE_SPECIES"] }
    function trim(s) { sub(/\r$/, "", s); return s }
    function jesc(s,    out, i, c) {
        out = ""
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "\\" || c == "\"") out = out "\\" c; else out = out c
        }
        return out
    }
    NR == 1 {
        for (i = 1; i <= NF; i++) col[trim($i)] = i
        if (!("species" in col) || !("body_mass_g" in col) || !("flipper_length_mm" in col)) {
            print "summarize.sh: header lacks species, body_mass_g or flipper_length_mm" > "/dev/stderr"
            bad_header = 1
            exit 4
        }
        sp = col["species"]; bm = col["body_mass_g"]; fl = col["flipper_length_mm"]
        next
    }
    {
        rows++
        if (trim($sp) != species) next
        matched++
        mass = trim($bm); flip = trim($fl)
        if (mass != "NA" && mass != "") { n_mass++; sum_mass += mass }
        if (flip != "NA" && flip != "") { n_flip++; sum_flip += flip }
    }
    END {
        if (bad_header) exit 4
        printf "rows read: %d\n", rows > "/dev/stderr"
        printf "rows of %s: %d\n", species, matched > "/dev/stderr"
        printf "rows used (body mass present): %d\n", n_mass > "/dev/stderr"
        printf "rows used (flipper length present): %d\n", n_flip > "/dev/stderr"
        if (n_mass == 0 || n_flip == 0) {
            printf "summarize.sh: no usable rows for species \"%s\" (known species are in the species column)\n", species > "/dev/stderr"
            exit 3
        }
        printf "{\"species\":\"%s\",\"count\":%d,\"mean_body_mass_g\":%.2f,\"mean_flipper_length_mm\":%.2f}\n", jesc(species), n_mass, sum_mass / n_mass, sum_flip / n_flip
    }
' "$input" > "$tmp" 2> "$tmp.log" || status=$?

# Log lines to stdout, error lines to stderr.
if [ -f "$tmp.log" ]; then
    grep -v '^summarize.sh:' "$tmp.log" || true
    grep '^summarize.sh:' "$tmp.log" >&2 || true
    rm -f "$tmp.log"
fi

if [ "$status" -ne 0 ]; then
    exit 1
fi

mv "$tmp" "$outdir/summary.json"
echo "wrote $outdir/summary.json"
