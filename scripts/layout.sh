#!/usr/bin/env bash
# layout.sh moves the module's packages into the layout README.md draws: pkg/ holds the
# products' packages nested by concern (the engine under pkg/jail and pkg/proxy, arizuko's
# under pkg/arizuko), internal/ the shared plumbing and everything only tests import.
#
# It is mechanical and idempotent, so it can run again on a tree other branches have
# changed since: it moves whole directories (files added meanwhile go along), rewrites
# every mention of an old path in the tree's text files (imports, comments, docs,
# Makefile, scripts), corrects relative climbs to the module root ("..", "..",
# "examples") in the files it moved, formats what it touched, and builds and vets.
# Package names do not change, so only import paths do.
#
#   scripts/layout.sh            move, rewrite, gofmt, go build ./... and go vet ./...
#   LAYOUT_CHECK=0 scripts/layout.sh     skip the build and vet
#   LAYOUT_AUTO=0 scripts/layout.sh      do not place packages the map does not know
#
# A top-level pkg/X the map does not name is placed by who imports it: reached from
# cmd/arizuko alone, it goes under pkg/arizuko; reached from no binary and named *test,
# under internal/; anything else is left in place with a warning to add it to MOVES.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
export PATH="/usr/local/go/bin:$PATH"

# old -> new; names stay, so every moved package keeps its package clause.
MOVES=(
	# test-only: imported by tests alone, never by a binary
	"pkg/jail/jailtest internal/jailtest"
	"pkg/service/servicetest internal/servicetest"
	"pkg/webdriver internal/webdriver"
	# plumbing both binaries share
	"pkg/buildinfo internal/buildinfo"
	"pkg/proc internal/proc"
	"pkg/logfile internal/logfile"
	"pkg/natsauth internal/natsauth"
	"pkg/slackadapter/slacktest internal/slacktest"
	# the jail: the guest, its protocol and image, its shares, its network, its records
	"pkg/control pkg/jail/control"
	"pkg/guest pkg/jail/guest"
	"pkg/initramfs pkg/jail/initramfs"
	"pkg/sharefs pkg/jail/sharefs"
	"pkg/netjail pkg/jail/netjail"
	"pkg/runrec pkg/jail/runrec"
	# the egress proxy and what its decisions are made of
	"pkg/allow pkg/proxy/allow"
	"pkg/inject pkg/proxy/inject"
	"pkg/dns pkg/proxy/dns"
	"pkg/dest pkg/proxy/dest"
	# the proxy daemon's state shared between replicas
	"pkg/fleet pkg/admin/fleet"
	# arizuko, the second product (pkg/router stays where it is)
	"pkg/acl pkg/arizuko/acl"
	"pkg/api pkg/arizuko/api"
	"pkg/delivery pkg/arizuko/delivery"
	"pkg/dispatch pkg/arizuko/dispatch"
	"pkg/folder pkg/arizuko/folder"
	"pkg/gated pkg/arizuko/gated"
	"pkg/service pkg/arizuko/service"
	"pkg/store pkg/arizuko/store"
	"pkg/turn pkg/arizuko/turn"
	"pkg/webchat pkg/arizuko/webchat"
	"pkg/adapter pkg/arizuko/adapter"
	"pkg/email pkg/arizuko/email"
	"pkg/hook pkg/arizuko/hook"
	"pkg/home pkg/arizuko/home"
	"pkg/schedule pkg/arizuko/schedule"
	"pkg/slackadapter pkg/arizuko/slackadapter"
)
# The top level of pkg/ after the moves.
KEEP=(admin arizuko config jail proxy router secrets)

MOD=$(go list -m)
SELF=scripts/layout.sh
log() { printf 'layout: %s\n' "$*" >&2; }

# Place top-level packages the map does not know, from the binaries' imports; this
# needs the tree as it is before the moves, when it still builds.
if [ "${LAYOUT_AUTO:-1}" != 0 ]; then
	known=" ${KEEP[*]} "
	for m in "${MOVES[@]}"; do
		old=${m%% *}
		case $old in pkg/*/*) ;; pkg/*) known+="${old#pkg/} " ;; esac
	done
	unknown=()
	for d in pkg/*/; do
		d=${d%/}
		[[ $known == *" ${d#pkg/} "* ]] || unknown+=("$d")
	done
	if [ ${#unknown[@]} -gt 0 ]; then
		if deps_c=$(go list -deps ./cmd/crackbox 2>/dev/null) && deps_a=$(go list -deps ./cmd/arizuko 2>/dev/null) &&
			deps_g=$(go list -deps ./guestfs/... 2>/dev/null); then
			reaches() { grep -qE "^$MOD/$2(/|\$)" <<<"$1"; }
			for d in "${unknown[@]}"; do
				name=${d#pkg/}
				if reaches "$deps_a" "$d" && ! reaches "$deps_c" "$d" && ! reaches "$deps_g" "$d"; then
					MOVES+=("$d pkg/arizuko/$name")
					log "placing $d under pkg/arizuko: only cmd/arizuko imports it"
				elif ! reaches "$deps_a" "$d" && ! reaches "$deps_c" "$d" && ! reaches "$deps_g" "$d" && [[ $name == *test ]]; then
					MOVES+=("$d internal/$name")
					log "placing $d under internal: no binary imports it"
				else
					log "warning: $d is not in the map; add it to MOVES in $SELF"
				fi
			done
		else
			log "warning: go list fails on this tree, so ${unknown[*]} stay where they are"
		fi
	fi
fi

# Deepest first, so a nested package leaves before its parent's directory moves.
mapfile -t MOVES < <(printf '%s\n' "${MOVES[@]}" | awk '{print length($1), $0}' | sort -rn | cut -d' ' -f2-)

# What is at the module root, to tell a climb to the root ("../../examples") from a
# path that merely starts with ".." (a traversal a test feeds on purpose).
ROOT_ENTRIES=$(ls -A | grep -vx '.git' | tr '\n' ' ')
depth() { local p=$1; p=${p//[^\/]/}; echo $((${#p} + 1)); }

# fix_climbs FILE OLD_DEPTH NEW_DEPTH: a moved file's climbs to the module root.
fix_climbs() {
	FROM=$2 TO=$3 ROOTS=" $ROOT_ENTRIES" perl -0pi -e '
		my ($from, $to, $roots) = ($ENV{FROM}, $ENV{TO}, $ENV{ROOTS});
		my $root = sub { index($roots, " $_[0] ") >= 0 };
		# filepath.Join(x, "..", "..", "examples", ...)
		s{((?:"\.\.",\s*)+)"([^"/]+)}{
			my ($ups, $first) = ($1, $2); my $k = () = $ups =~ /"\.\."/g;
			($k == $from && $root->($first)) ? join("", map { "\"..\", " } 1..$to) . "\"$first" : "$ups\"$first"
		}ge;
		# "../../examples/agents"
		s{"((?:\.\./)+)([^"/]+)}{
			my ($ups, $first) = ($1, $2); my $k = () = $ups =~ /\.\.\//g;
			($k == $from && $root->($first)) ? "\"" . ("../" x $to) . $first : "\"$ups$first"
		}ge;
	' "$1"
}

moved_go=()
for m in "${MOVES[@]}"; do
	old=${m%% *} new=${m#* }
	[ -d "$old" ] || continue
	from=$(depth "$old") to=$(depth "$new")
	# Files under old, as paths relative to it (tracked and untracked, not ignored).
	mapfile -t files < <(git ls-files -co --exclude-standard -- "$old" | sed "s|^$old/||")
	if [ ${#files[@]} -eq 0 ]; then
		find "$old" -type d -empty -delete 2>/dev/null || true
		continue
	fi
	if [ ! -e "$new" ]; then
		mkdir -p "$(dirname "$new")"
		git mv "$old" "$new"
		# git mv leaves untracked files behind when it moves file by file.
		[ -d "$old" ] && find "$old" -type d -empty -delete
	else
		# The new place exists (a file added at the old path after an earlier run): merge.
		for f in "${files[@]}"; do
			mkdir -p "$(dirname "$new/$f")"
			if git ls-files --error-unmatch -- "$old/$f" >/dev/null 2>&1; then
				git mv -k "$old/$f" "$new/$f"
			else
				mv "$old/$f" "$new/$f"
			fi
		done
		find "$old" -type d -empty -delete 2>/dev/null || true
	fi
	[ -d "$old" ] && log "warning: $old still holds files git ignores: $(find "$old" -type f | head -3 | tr '\n' ' ')"
	log "moved $old -> $new"
	for f in "${files[@]}"; do
		sub=$(dirname "$f")
		[[ $f == *.go ]] || continue
		if [ "$sub" = . ]; then fd=$from td=$to; else fd=$((from + $(depth "$sub"))) td=$((to + $(depth "$sub"))); fi
		if [ -f "$new/$f" ]; then
			fix_climbs "$new/$f" "$fd" "$td"
			moved_go+=("$new/$f")
		fi
	done
done

# Rewrite the old paths wherever the tree's text names them: the module path in Go
# imports, and the bare path (at a word start or after "./") in comments, docs, the
# Makefile and scripts. Longest first, so pkg/service/servicetest is not read as pkg/service.
# Migrations are left alone: a store may checksum what it applied.
pairs=$(printf '%s\n' "${MOVES[@]}")
alt=$(printf '%s\n' "${MOVES[@]}" | cut -d' ' -f1 | paste -sd'|')
mapfile -t text < <(git ls-files -co --exclude-standard | grep -vxF "$SELF" | grep -vE '(\.sql|go\.sum)$' |
	while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done | xargs -r grep -lIE "(^|[^A-Za-z0-9_./-]|\./|/)($alt)([^A-Za-z0-9_-]|\$)" || true)
if [ ${#text[@]} -gt 0 ]; then
	PAIRS=$pairs MOD=$MOD perl -pi -e '
		BEGIN {
			for (split /\n/, $ENV{PAIRS}) { my ($o, $n) = split / /; push @p, [$o, $n] }
			@p = sort { length($b->[0]) <=> length($a->[0]) } @p;
			$mod = quotemeta("$ENV{MOD}/");
		}
		for my $p (@p) {
			my ($o, $n) = (quotemeta($p->[0]), $p->[1]);
			s{(^|[^\w./-]|\./|$mod)$o(?![\w-])}{$1$n}g;
		}
	' "${text[@]}"
fi

# gofmt sorts each import block, so a path that moved across the alphabet lands in order.
mapfile -t gofiles < <(printf '%s\n' "${text[@]}" "${moved_go[@]}" | grep '\.go$' | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
[ ${#gofiles[@]} -gt 0 ] && gofmt -w "${gofiles[@]}"

top=$(find pkg -mindepth 1 -maxdepth 1 -type d | wc -l)
log "pkg/ has $top top-level directories"
for d in pkg/*/; do
	d=${d%/}
	[[ " ${KEEP[*]} " == *" ${d#pkg/} "* ]] || log "warning: $d is not in the layout's top level"
done

if [ "${LAYOUT_CHECK:-1}" != 0 ]; then
	go build ./...
	go vet ./...
	log "go build and go vet pass"
fi
