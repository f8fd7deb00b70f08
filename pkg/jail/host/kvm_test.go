package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/testreq"
)

func TestCheckKVM(t *testing.T) {
	const kvm, me, other = 108, 1000, 1001
	rootKVM0660 := &DevStat{UID: 0, GID: kvm, Perm: 0o660, Group: "kvm"}
	cases := []struct {
		name string
		dev  *DevStat
		user KVMUser
		ok   bool
		fix  string // a fragment of the fix, "" when ok
	}{
		{"no device", nil, KVMUser{UID: me, GID: me}, false, "modprobe"},
		{"in the group", rootKVM0660, KVMUser{UID: me, GID: me, Groups: []uint32{kvm}}, true, ""},
		{"primary group is the device's", rootKVM0660, KVMUser{UID: me, GID: kvm}, true, ""},
		{"not in the group", rootKVM0660, KVMUser{UID: me, GID: me}, false, "usermod -aG kvm $USER"},
		{"joined but not logged in again", rootKVM0660, KVMUser{UID: me, GID: me, Listed: []uint32{kvm}}, false, "log out and in again"},
		{"world rw (0666)", &DevStat{GID: kvm, Perm: 0o666, Group: "kvm"}, KVMUser{UID: me, GID: me}, true, ""},
		{"owner bits decide for the owner", &DevStat{UID: me, GID: kvm, Perm: 0o066}, KVMUser{UID: me, GID: me, Groups: []uint32{kvm}}, false, "udev"},
		{"group without write", &DevStat{GID: kvm, Perm: 0o640, Group: "kvm"}, KVMUser{UID: me, GID: me, Groups: []uint32{kvm}}, false, "udev"},
		// crackbox as root adds the device's own group to QEMU's: whatever the group's
		// name or gid, even with no kvm group in /etc/group.
		{"root adds the device gid", rootKVM0660, KVMUser{UID: VMMUIDBase, GID: VMMUIDBase, Privileged: true}, true, ""},
		{"root adds a foreign gid", &DevStat{GID: 36, Perm: 0o660}, KVMUser{UID: other, GID: other, Privileged: true}, true, ""},
		{"0600 root:root is closed to QEMU's uid", &DevStat{Perm: 0o600}, KVMUser{UID: VMMUIDBase, GID: VMMUIDBase, Privileged: true}, false, "udev"},
		{"group 0 is never added", &DevStat{Perm: 0o660}, KVMUser{UID: VMMUIDBase, GID: VMMUIDBase, Privileged: true}, false, "udev"},
		{"uid 0", &DevStat{Perm: 0o600}, KVMUser{UID: 0}, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := CheckKVM(c.dev, c.user)
			if v.OK != c.ok {
				t.Fatalf("ok = %v, want %v (%s)", v.OK, c.ok, v.Why)
			}
			if !c.ok && (!strings.Contains(v.Fix, c.fix) || v.Why == "") {
				t.Fatalf("why %q fix %q, want a reason and a fix with %q", v.Why, v.Fix, c.fix)
			}
			if c.fix != "usermod -aG kvm $USER" && strings.Contains(v.Fix, "usermod") {
				t.Fatalf("fix %q advises usermod where group membership is not the cause", v.Fix)
			}
		})
	}
}

// TestQEMUGetsTheDeviceGroup: the group added to QEMU's as root is the one /dev/kvm
// really has, not /etc/group's kvm, and never root's group.
func TestQEMUGetsTheDeviceGroup(t *testing.T) {
	testreq.Root(t, "chowns a fake device node")
	dev := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(dev, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	for _, gid := range []int{4242, 0} {
		if err := os.Chown(dev, 0, gid); err != nil {
			t.Fatal(err)
		}
		want := gid
		if gid == 0 {
			want = -1
		}
		if got := deviceGID(dev); got != want {
			t.Errorf("device gid %d: deviceGID = %d, want %d", gid, got, want)
		}
	}
}

// TestAutoFallsBackToTCGForQEMUsUser: crackbox (root) could open a 0600 root:root
// /dev/kvm, QEMU's uid cannot; auto picks TCG with a one-line reason, kvm is refused.
func TestAutoFallsBackToTCGForQEMUsUser(t *testing.T) {
	v := CheckKVM(&DevStat{Perm: 0o600}, KVMUser{UID: VMMUIDBase, GID: VMMUIDBase, Privileged: true})
	p := Facts{KVMOpens: v.OK, KVMErr: v.Why, KVMFix: v.Fix, KVMModule: "kvm_intel", CPUVirtExt: true}
	acc, why, err := ChooseAccel(AccelAuto, p)
	if err != nil || acc != AccelTCG {
		t.Fatalf("auto = %s, %v; want tcg", acc, err)
	}
	if !strings.Contains(why, "0600") || strings.Contains(why, "\n") {
		t.Fatalf("reason %q: want one line naming the device's mode", why)
	}
	if _, _, err := ChooseAccel(AccelKVM, p); err == nil {
		t.Fatal("--accel kvm accepted although QEMU's user cannot open /dev/kvm")
	}
}
