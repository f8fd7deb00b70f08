#!/bin/sh
# Fetch Debian's cloud kernel as crackbox's fallback guest kernel, without installing it:
# apt-get download + dpkg-deb -x into ~/.cache/crackbox/debian-<kver>-<pkgver>/, then the modules
# the guest needs are copied, decompressed, into <dir>/crackbox-modules/ in load order
# (listed in crackbox-modules/order). crackbox sees that directory next to the kernel and
# puts the modules into the initramfs for guest-init to load. The last line printed is the
# kernel image path, for CRACKBOX_KERNEL or --kernel.
set -eu

# What the guest needs, in the order microvm loads them; dependencies are added from
# modules.dep. Missing ones (e.g. vsock parts on another kernel version) are skipped.
WANT="virtio_ring virtio virtio_mmio virtio_pci virtio_console failover net_failover virtio_net fuse virtiofs overlay vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport"

cache=${CRACKBOX_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}/crackbox}

resolve() { apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
pkg=$(resolve)
# A machine whose package lists were never fetched (or were wiped) knows no kernel yet.
if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
	apt-get update -q >/dev/null 2>&1 || true
	pkg=$(resolve)
fi
if [ -z "$pkg" ]; then
	echo "debian.sh: cannot resolve linux-image-cloud-amd64; it comes from Debian's archive: add it to the apt sources, then apt-get update" >&2
	exit 1
fi
pkgver=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2; exit}')
kver=${pkg#linux-image-}
dir=$cache/debian-$kver-$pkgver
img=$dir/boot/vmlinuz-$kver

# pick prints the image to boot: the uncompressed vmlinux (PVH entry, faster on microvm)
# when it could be extracted, else the bzImage.
pick() {
	if [ -f "$dir/vmlinux" ]; then echo "$dir/vmlinux"; else echo "$img"; fi
}

if [ -f "$dir/crackbox-modules/order" ] && [ -f "$img" ]; then
	pick
	exit 0
fi

echo "debian.sh: fetching $pkg $pkgver into $dir" >&2
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.debian-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "$pkg" >&2)
mkdir -p "$tmp/x"
dpkg-deb -x "$tmp"/*.deb "$tmp/x"

mods=$tmp/x/lib/modules/$kver
[ -d "$mods" ] || { echo "debian.sh: no lib/modules/$kver in $pkg" >&2; exit 1; }
# The package leaves modules.dep to its postinst; compute it inside the extract only.
[ -f "$mods/modules.dep" ] || depmod -b "$tmp/x" "$kver"

# Resolve dependencies depth-first from modules.dep so each module follows what it needs.
out=$tmp/x/crackbox-modules
mkdir -p "$out"
: >"$out/order"
seen=" "
add() {
	local name pat line file dep d base # dash and bash both have local; add recurses
	name=$1
	case "$seen" in *" $name "*) return ;; esac
	seen="$seen$name "
	# modules.dep names files with '-' or '_' interchangeably; match both.
	pat=$(echo "$name" | sed 's/[-_]/[-_]/g')
	line=$(grep -E "/$pat\.ko(\.xz|\.zst|\.gz)?:" "$mods/modules.dep" | head -1) || true
	[ -n "$line" ] || { echo "debian.sh: module $name not in this kernel, skipped" >&2; return 0; }
	file=${line%%:*}
	for dep in ${line#*:}; do
		d=$(basename "$dep"); d=${d%%.ko*}
		add "$(echo "$d" | tr - _)"
	done
	base=$(basename "$file"); base=${base%%.ko*}.ko
	case "$file" in
	*.xz) xz -dc "$mods/$file" >"$out/$base" ;;
	*.zst) zstd -qdc "$mods/$file" >"$out/$base" ;;
	*.gz) gzip -dc "$mods/$file" >"$out/$base" ;;
	*) cp "$mods/$file" "$out/$base" ;;
	esac
	echo "$base" >>"$out/order"
}
for m in $WANT; do
	# builtin modules need no loading
	if grep -qE "/$(echo "$m" | sed 's/[-_]/[-_]/g')\.ko$" "$mods/modules.builtin" 2>/dev/null; then
		continue
	fi
	add "$m"
done

# The bzImage's payload is LZ4 (Debian's CONFIG_KERNEL_LZ4); it starts at
# (setup_sects+1)*512 + payload_offset (header bytes 0x1f1 and 0x248..0x24f). lz4 exits
# non-zero on the size word the kernel build appends, so the ELF magic is the check.
bz=$tmp/x/boot/vmlinuz-$kver
if command -v lz4 >/dev/null && command -v od >/dev/null; then
	u8() { od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' '; }
	u32() { od -An -tu4 -j "$2" -N 4 "$1" | tr -d ' '; }
	ss=$(u8 "$bz" $((0x1f1))); [ "$ss" -ne 0 ] || ss=4
	off=$(( (ss + 1) * 512 + $(u32 "$bz" $((0x248))) ))
	len=$(u32 "$bz" $((0x24c)))
	dd if="$bz" bs=64k iflag=skip_bytes,count_bytes skip="$off" count="$len" status=none |
		lz4 -dc >"$tmp/x/vmlinux" 2>/dev/null || true
	if [ "$(head -c 4 "$tmp/x/vmlinux" | od -An -tx1 | tr -d ' ')" != 7f454c46 ]; then
		echo "debian.sh: could not extract vmlinux from the bzImage; booting the bzImage (slower)" >&2
		rm -f "$tmp/x/vmlinux"
	fi
else
	echo "debian.sh: lz4 missing (apt-get install lz4); booting the bzImage (slower)" >&2
fi

rm -rf "$dir"
mkdir -p "$dir"
mv "$tmp/x/boot" "$tmp/x/crackbox-modules" "$dir/"
[ ! -f "$tmp/x/vmlinux" ] || mv "$tmp/x/vmlinux" "$dir/"
echo "debian.sh: $(wc -l <"$dir/crackbox-modules/order") modules: $(tr '\n' ' ' <"$dir/crackbox-modules/order")" >&2
pick
