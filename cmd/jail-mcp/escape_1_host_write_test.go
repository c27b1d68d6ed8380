//go:build linux

package main

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// hostWrites are the attacks that write to the host, each a script run in
// the jail, by name.
var hostWrites = []struct{ name, script string }{
	{"plain-write", `
for f in "$VFILE" "$VICTIM/new-$MARKER" "$KEEP" "$PROJECT/new-$MARKER" "$PROJECT/src/main.c" \
	"/etc/$MARKER" "/$MARKER" "/usr/local/$MARKER" "$HOSTHOME/$MARKER" "$HOSTHOME/.bashrc" \
	"$PROJECT/.agent-home/$MARKER" "$PROJECT/.agent-home/.gitignore"; do
	try sh -c 'echo x > "$1"' sh "$f"
	try sh -c 'echo x >> "$1"' sh "$f"
	try cp "$KEEP" "$f"
done
for d in "$VICTIM" "$PROJECT" "$HOSTHOME" /etc; do
	try mkdir "$d/dir-$MARKER"
	try mkfifo "$d/fifo-$MARKER"
	try ln -s / "$d/link-$MARKER"
done
try rm "$VFILE"
try rm -r "$VICTIM/sub"
try rmdir "$VICTIM/emptydir"
try rm "$KEEP"
` + py(`
for p in TARGETS + [E["VICTIM"] + "/new-" + E["MARKER"], E["PROJECT"] + "/new-" + E["MARKER"]]:
    attempt("open for writing " + p, os.open, p, os.O_WRONLY | os.O_CREAT, 0o644)
    attempt("open a directory for writing " + p, os.open, p, os.O_RDWR | os.O_DIRECTORY)
    attempt("O_TMPFILE in " + p, os.open, p, os.O_WRONLY | getattr(os, "O_TMPFILE", 0o20200000), 0o600)
`)},
	{"rename-out", `
echo evil > "$HOME/evil"; mkdir -p "$HOME/evildir"
for dst in "$VFILE" "$KEEP" "$VICTIM/new-$MARKER" "$PROJECT/new-$MARKER" "$OTHER/b-secret" "$HOSTHOME/.gitconfig"; do
	try mv -f "$HOME/evil" "$dst"
done
try mv -T "$HOME/evildir" "$VICTIM/sub"
try mv -T "$HOME/evildir" "$VICTIM/emptydir"
` + py(`
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT_FDCWD, RENAME_NOREPLACE, RENAME_EXCHANGE = -100, 1, 2
src = HOME + "/evil"
for dst in TARGETS + [E["VICTIM"] + "/new-" + E["MARKER"]]:
    attempt("rename over " + dst, os.rename, src, dst)
    attempt("replace " + dst, os.replace, src, dst)
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), RENAME_EXCHANGE) == 0:
        escaped("renameat2 RENAME_EXCHANGE with " + dst)
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, (dst + "-" + E["MARKER"]).encode(), RENAME_NOREPLACE) == 0:
        escaped("renameat2 next to " + dst)
`)},
	{"rename-in", `
for src in "$VFILE" "$KEEP" "$VICTIM/sub" "$OTHER/b-secret" "$HOSTHOME/.gitconfig" "$HOSTHOME/.config/gh"; do
	try mv "$src" "$HOME/stolen"
	rm -rf "$HOME/stolen"
done
` + py(`
for src in TARGETS + [E["OTHER"] + "/b-secret", E["HOSTHOME"] + "/.config/gh"]:
    attempt("rename " + src + " into the jail", os.rename, src, HOME + "/stolen")
`)},
	{"hardlink", `
for src in "$VFILE" "$KEEP" "$VICTIM/big" "$OTHER/b-secret" "$HOSTHOME/.gitconfig"; do
	try sh -c 'ln "$1" "$2" && echo x >> "$2"' sh "$src" "$HOME/hardlink"
	try ln "$src" "$HOME/hardlink2"
	rm -f "$HOME/hardlink" "$HOME/hardlink2"
done
` + py(`
for src in TARGETS + [E["VICTIM"] + "/big", E["OTHER"] + "/b-secret"]:
    dst = HOME + "/hardlink3"
    try:
        fd = os.open(src, os.O_RDONLY)
    except OSError:
        continue
    # linkat(AT_SYMLINK_FOLLOW) through the descriptor's magic link
    attempt("link " + src + " through /proc/self/fd", os.link, "/proc/self/fd/%d" % fd, dst)
    os.close(fd)
    try:
        os.unlink(dst)
    except OSError:
        pass
`)},
	{"symlink", `
ln -sfn "$VFILE" "$HOME/to-file"; ln -sfn "$VICTIM" "$HOME/to-dir"; ln -sfn "$KEEP" "$HOME/to-keep"
ln -sfn / "$HOME/to-root"; ln -sfn "$OTHER" "$HOME/to-other"
try sh -c 'echo x > "$HOME/to-file"'
try sh -c 'echo x >> "$HOME/to-keep"'
try sh -c 'echo x > "$HOME/to-dir/new-$MARKER"'
try sh -c 'echo x > "$HOME/to-root$VFILE"'
try sh -c 'echo x > "$HOME/to-other/b-secret"'
try cp "$KEEP" "$HOME/to-file"
try truncate -s 0 "$HOME/to-file"
try mkdir "$HOME/to-dir/dir-$MARKER"
try mv "$HOME/to-dir/file" "$HOME/stolen"
` + py(`
attempt("open through a symlink", os.open, HOME + "/to-file", os.O_WRONLY)
`)},
	{"truncate", `
targets | while read -r f; do
	try truncate -s 0 "$f"
	try truncate -s 1M "$f"
	try sh -c ': > "$1"' sh "$f"
done
try truncate -s 0 "$VICTIM/big"
` + py(`
for p in TARGETS + [E["VICTIM"] + "/big"]:
    attempt("truncate " + p, os.truncate, p, 0)
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    attempt("ftruncate a read-only descriptor of " + p, os.ftruncate, fd, 0)
    os.close(fd)
`)},
	{"chmod", metadataThrough(`
try chmod 777 "$HOME/to-file"
try chmod 777 "$HOME/to-dir"
`, `
	try chmod 777 "$p$VFILE"
`, `
	try chmod 777 "$f"
`, `
	try chmod 777 "$d"
`) + `
targets | while read -r f; do
	try chmod 777 "$f"
	try chmod 000 "$f"
	try chmod u+s "$f"
	try chmod +t "$f"
done
` + py(`
for p in TARGETS:
    try:
        mode = os.lstat(p).st_mode & 0o7777
    except OSError:
        continue
    # the same mode: harmless should it ever get through
    attempt("chmod " + p, os.chmod, p, mode)
attempt("fchmod a read-only descriptor", os.fchmod, 7, 0o777)
`) + "exec 7<&-\n"},
	{"chown", metadataThrough("", "", "", "") + `
targets | while read -r f; do
	try chown "$(id -u):$(id -g)" "$f"
	try chown 65534:65534 "$f"
	try chgrp "$(id -g)" "$f"
	try chown -h "$(id -u)" "$f"
done
` + py(`
for p in TARGETS:
    try:
        st = os.lstat(p)
    except OSError:
        continue
    attempt("chown " + p + " to its own owner", os.chown, p, st.st_uid, st.st_gid)
    attempt("lchown " + p, os.lchown, p, -1, -1)
attempt("fchown a read-only descriptor", os.fchown, 7, -1, -1)
`) + "exec 7<&-\n"},
	{"utime", metadataThrough(`
try touch -d 2000-01-01 "$HOME/to-file"
`, `
	try touch -c -d 2000-01-01 "$p$VFILE"
`, `
	try touch -c -d 2000-01-01 "$f"
`, "") + `
targets | while read -r f; do
	try touch -c "$f"
	try touch -c -d 2000-01-01 "$f"
	try touch -c -a -d 2000-01-01 "$f"
	try touch -c -m -d 2000-01-01 "$f"
	try touch -c -h -d 2000-01-01 "$f"
done
` + py(`
for p in TARGETS:
    attempt("utime " + p, os.utime, p, (0, 0))
    attempt("utime now " + p, os.utime, p)
    attempt("utime without following " + p, os.utime, p, (0, 0), follow_symlinks=False)
attempt("utime through a symlink", os.utime, HOME + "/to-file", (0, 0))
attempt("futimes a read-only descriptor", os.utime, 7, (0, 0))
`) + "exec 7<&-\n"},
	{"xattr", py(`
for p in TARGETS:
    for name in ("user.jail_mcp", "trusted.jail_mcp", "security.jail_mcp"):
        attempt("setxattr %s on %s" % (name, p), os.setxattr, p, name, b"1")
    attempt("removexattr on " + p, os.removexattr, p, "user.jail_mcp")
`)},
	{"proc-self-root", `
for p in /proc/self/root /proc/thread-self/root "/proc/$$/root"; do
	try sh -c 'echo x > "$1$2"' sh "$p" "$VFILE"
	try sh -c 'echo x > "$1$2/new-$MARKER"' sh "$p" "$PROJECT"
	try sh -c 'echo x > "$1$2/new-$MARKER"' sh "$p" "$HOSTHOME"
	try sh -c 'echo x > "$1$2/b-secret"' sh "$p" "$OTHER"
	try mkdir "$p$VICTIM/dir-$MARKER"
done
`},
	{"proc-1-root", `
for p in /proc/[0-9]*; do
	try sh -c 'echo x > "$1/root$2"' sh "$p" "$VFILE"
	try sh -c 'echo x > "$1/root$2/new-$MARKER"' sh "$p" "$VICTIM"
	try sh -c 'echo x > "$1/root$2/new-$MARKER"' sh "$p" "$PROJECT"
	try sh -c 'echo x > "$1/root/$2"' sh "$p" "$MARKER"
done
`},
	// Each attempt names its working directory ($0 of sh -c), which an
	// ESCAPED line under the project view is judged by (inView).
	{"proc-self-cwd", `
cd "$PROJECT"
try sh -c 'echo x > /proc/self/cwd/keep.txt' "$PWD"
try sh -c 'echo x > "/proc/self/cwd/new-$MARKER"' "$PWD"
try sh -c 'echo x > "/proc/$PPID/cwd/new-$MARKER"' "$PWD"
cd "$VICTIM"
try sh -c 'echo x > /proc/self/cwd/file' "$PWD"
try sh -c 'echo x > "/proc/self/cwd/new-$MARKER"' "$PWD"
try sh -c 'echo x > "/proc/$PPID/cwd/new-$MARKER"' "$PWD"
cd "$HOSTHOME"
try sh -c 'echo x > /proc/self/cwd/.gitconfig' "$PWD"
cd "$HOME"
`},
	{"proc-self-fd", `
exec 7<"$VFILE" 8<"$VICTIM" 9<"$KEEP"
try sh -c 'echo x > /proc/self/fd/7'
# descriptor 9 is of the project, which the attempt names ($0): under the
# project view the append lands in the session's layer (inView)
try sh -c 'echo x >> /proc/self/fd/9' "$KEEP"
try sh -c 'echo x > "/proc/self/fd/8/new-$MARKER"'
try sh -c 'echo x > "/dev/fd/8/new-$MARKER"'
` + py(`
attempt("reopen a read-only descriptor for writing", os.open, "/proc/self/fd/7", os.O_WRONLY)
attempt("create through a directory descriptor", os.open, "new-" + E["MARKER"], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=8)
attempt("mkdir through a directory descriptor", os.mkdir, "dir-" + E["MARKER"], dir_fd=8)
`) + `exec 7<&- 8<&- 9<&-
`},
	{"dev", `
try mknod "$HOME/null-$MARKER" c 1 3
try mknod "$HOME/disk-$MARKER" b 8 0
try mknod "/dev/$MARKER" c 1 3
# the private /dev may take a file; the host's must not see it
echo private > "/dev/$MARKER-file" 2>/dev/null
` + py(`
for d in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/nvme0n1",
          "/dev/xvda", "/dev/loop0", "/dev/console", "/dev/tty0", "/dev/tty1", "/dev/fuse",
          "/dev/net/tun", "/dev/kvm", "/dev/vsock", "/dev/vhost-vsock", "/dev/cpu/0/msr"):
    attempt("open %s for writing" % d, os.open, d, os.O_WRONLY | os.O_NONBLOCK)
`)},
	{"tmp", `
for d in /tmp /var/tmp /run /run/lock /var/lock /dev/mqueue "/run/user/$(id -u)"; do
	try sh -c 'echo x > "$1/$2"' sh "$d" "$MARKER"
	try mkdir "$d/$MARKER-dir"
	try mkfifo "$d/$MARKER-fifo"
done
# the private /dev/shm takes these; the host's must not see them
echo private > "/dev/shm/$MARKER-private" 2>/dev/null
` + py(`
try:
    fd = os.open("/dev/shm/" + E["MARKER"] + "-shm", os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    os.write(fd, b"shm")
except OSError:
    pass
`)},
}

// Promise 1: no write to the host outside the session's jail.
func (fx *escapeFixture) noHostWrite(t *testing.T) {
	for _, v := range hostWrites {
		fx.vector(t, v.name, func(t *testing.T) {
			if other := onOtherSession[v.name]; other != "" {
				fx.bothWays(t, other)
			}
			fx.attack(t, fx.a, v.script, nil)
		})
	}

	fx.vector(t, "remount", func(t *testing.T) {
		before := mountPoints(t)
		fx.attack(t, fx.a, `
try mount -o remount,rw /
try mount -o remount,rw "$PROJECT"
try mount -o remount,bind,rw "$PROJECT"
try mount -o remount,rw "$HOSTHOME/.gitconfig"
try mount -t tmpfs none "$VICTIM"
try mount -t tmpfs none "$PROJECT"
try mount -t tmpfs none "$HOSTHOME"
try mount -t tmpfs none /mnt
try mount --bind "$HOME" "$VICTIM"
try mount --bind "$HOME" "$PROJECT"
try umount "$HOME/.gitconfig"
try sh -c 'echo x > "$VFILE"'
`+py(`
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
for target, fstype, flags in ((b"/", None, MS_REMOUNT), (E["PROJECT"].encode(), None, MS_REMOUNT | MS_BIND),
                              (E["VICTIM"].encode(), b"tmpfs", 0), (E["PROJECT"].encode(), b"tmpfs", 0)):
    if libc.mount(b"none", target, fstype, flags, None) == 0:
        escaped("mount(2) on " + target.decode())
`), nil)
		if after := mountPoints(t); !slices.Equal(before, after) {
			fx.escape(t, "host mounts changed:\nbefore %v\nafter  %v", before, after)
		}
	})

	fx.vector(t, "credential", func(t *testing.T) {
		res := fx.attack(t, fx.a, `
cat "$HOME/.gitconfig" "$HOME/.config/gh/hosts.yml" "$HOME/.codex/auth.json"; echo
for f in `+credentialFiles+`; do
	try sh -c 'echo x >> "$1"' sh "$f"
	try truncate -s 0 "$f"
done
for d in `+credentialDirs+`; do
	try sh -c 'echo x > "$1/new-$MARKER"' sh "$d"
	try ln -s /etc/passwd "$d/link-$MARKER"
done
for f in "$HOSTHOME/.gitconfig" "$HOSTHOME/.config/gh" "$HOSTHOME/.codex/auth.json" "$HOSTHOME/.claude.json"; do
	try mv "$f" "$f.moved"
	try rm -r "$f"
done
# mount points of the jail: the kernel refuses, and the host is not them
rm -f "$HOME/.gitconfig" 2>/dev/null; rm -rf "$HOME/.config/gh" 2>/dev/null; umount "$HOME/.gitconfig" 2>/dev/null
# the writable state copies take writes, privately
echo private >> "$HOME/.codex/config.toml"; echo private >> "$HOME/.claude.json"
`, nil)
		for _, want := range []string{"host-user", "gho_fake_host_token", "codex-fake-secret"} {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("credential %q not exposed read-only: the attack proves nothing\n%s", want, res.Stdout)
			}
		}
	})

	// Inode flags (chattr) through a read-only descriptor: Landlock checks
	// opens, not this ioctl. Set to the flags the file has: harmless
	// should it get through, and still an act the kernel permits only to
	// the owner.
	fx.vector(t, "inode-flags", func(t *testing.T) {
		fx.attack(t, fx.a, py(`
import fcntl, struct
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS = 0x80086601, 0x40086602, 0x40046602
FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR = 0x801c581f, 0x401c5820
for p in TARGETS:
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        flags = fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0))
    except OSError:
        flags = None
    if flags is not None:
        attempt("FS_IOC_SETFLAGS on " + p, fcntl.ioctl, fd, FS_IOC_SETFLAGS, flags)
        attempt("FS_IOC32_SETFLAGS on " + p, fcntl.ioctl, fd, FS_IOC32_SETFLAGS, flags[:4])
    try:
        xattr = fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28))
        attempt("FS_IOC_FSSETXATTR on " + p, fcntl.ioctl, fd, FS_IOC_FSSETXATTR, xattr)
    except OSError:
        pass
    os.close(fd)
`), nil)
	})

	fx.vector(t, "fs-ioctls", func(t *testing.T) {
		// The file systems' own ioctls that change a file through a
		// read-only descriptor, where the file system checks the owner
		// and not the descriptor's mode: an fscrypt policy on an empty
		// host directory (shown on an ext4 with encryption: the
		// directory then takes no file without a key), fs-verity (the
		// file frozen), btrfs subvolumes and snapshots, f2fs atomic
		// writes, ext4's extent migration. Under landlock nothing but
		// the filter stands before the file system, so the jail must be
		// what refuses them (EPERM), not this machine's file system
		// lacking the feature (EOPNOTSUPP, ENOTTY); under bwrap the
		// read-only mounts refuse what the file system supports.
		strict := "0"
		if fx.landlock() {
			strict = "1"
		}
		fx.attack(t, fx.a, py(`
import errno, fcntl, struct
STRICT = E["STRICT"] == "1"
enc = struct.pack("=BBBB8s", 0, 1, 4, 2, b"jailmcp!")
verity = struct.pack("=IIIIQIIQ88s", 1, 1, 4096, 0, 0, 0, 0, 0, b"")
dir_ioctls = [("FS_IOC_SET_ENCRYPTION_POLICY", 0x800c6613, enc),
              ("BTRFS_IOC_SUBVOL_CREATE", 0x5000940e, bytearray(4096)),
              ("BTRFS_IOC_SNAP_CREATE", 0x50009401, bytearray(4096))]
file_ioctls = [("FS_IOC_ENABLE_VERITY", 0x40806685, verity),
               ("EXT4_IOC_MIGRATE", 0x6609, 0),
               ("BTRFS_IOC_SUBVOL_SETFLAGS", 0x4008941a, struct.pack("Q", 2)),
               ("F2FS_IOC_START_ATOMIC_WRITE", 0xf501, 0)]
empty = os.path.join(E["VICTIM"], "emptydir")
for p in TARGETS + [empty]:
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    for name, cmd, arg in (dir_ioctls if os.path.isdir(p) else file_ioctls):
        try:
            fcntl.ioctl(fd, cmd, arg)
            escaped(name + " on " + p)
        except OSError as e:
            if STRICT and e.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
                escaped("%s on %s was refused by the file system (%s), not by the jail" % (name, p, errno.errorcode[e.errno]))
    os.close(fd)
`), map[string]any{"env": map[string]any{"STRICT": strict}})
	})

	fx.vector(t, "other-session", func(t *testing.T) {
		fx.bothWays(t, `
for f in `+otherSessionFiles+`; do
	try sh -c 'echo x > "$1"' sh "$f"
	try sh -c 'echo x >> "$1"' sh "$f"
	try sh -c 'echo x > "/proc/self/root$1"' sh "$f"
	try truncate -s 0 "$f"
	try rm "$f"
	try ln "$f" "$HOME/hardlink"
done
try rm -r "$OTHER/.tmp"
try ln -s "$VICTIM" "$OTHER/.cache2"
try mv "$OTHER/.config" "$OTHER/.config2"
try mkdir "$PROJECT/.agent-home/c-$MARKER"
try ln -s "$VICTIM" "$PROJECT/.agent-home/z-$MARKER"
try mv "$OTHER" "$OTHER-moved"
try rmdir "$OTHER"
try mv "$HOME" "$HOME-moved"
try sh -c 'echo x > "$PROJECT/.agent-home/.gitignore"'
`)
	})

	fx.vector(t, "writable-out", fx.writableOut)
}

// writableOut attacks from a directory of the project written in place
// (--writable node_modules) of a session of its own: nothing of it moves
// or links out into the read-only project or the host, nothing of them
// moves or links into it, and a link planted in it leads nowhere
// writable. Its contents change by design: the snapshot takes it whole,
// as it does the jails.
func (fx *escapeFixture) writableOut(t *testing.T) {
	w := filepath.Join(fx.project, "node_modules")
	ts := fx.start(t, fx.project, fx.env(), "--session", "w", "--auth", "none", "--writable", "node_modules")
	fx.opaque[w], fx.opaque[filepath.Join(fx.project, ".agent-home", "w")] = true, true
	fx.snapshot(t)
	fx.before = fx.snapshot(t)
	res := fx.attack(t, ts, `
mkdir -p "$W/d" "$W/dd/sub" && echo evil > "$W/d/f" && echo evil > "$W/dd/sub/g" && echo writable-ok
for dst in "$KEEP" "$PROJECT/new-$MARKER" "$PROJECT/src/main.c" "$PROJECT/src/new-$MARKER" "$VFILE" "$VICTIM/new-$MARKER" \
	"$OTHER/new-$MARKER" "$HOSTHOME/new-$MARKER" "$HOSTHOME/.gitconfig" "$PROJECT/.agent-home/new-$MARKER"; do
	try mv -f "$W/d/f" "$dst"
	try ln -f "$W/d/f" "$dst"
	try cp "$W/d/f" "$dst"
done
for dst in "$PROJECT/dir-$MARKER" "$PROJECT/src" "$VICTIM/dir-$MARKER" "$VICTIM/sub" "$VICTIM/emptydir"; do
	try mv -T "$W/dd" "$dst"
done
for src in "$KEEP" "$PROJECT/src/main.c" "$VFILE" "$HOSTHOME/.gitconfig"; do
	try sh -c 'ln "$1" "$2/hard" && echo x >> "$2/hard"' sh "$src" "$W"
	rm -f "$W/hard"
done
for src in "$KEEP" "$PROJECT/src" "$VFILE" "$VICTIM/sub"; do
	try sh -c 'mv "$1" "$2/stolen" && [ ! -e "$1" ]' sh "$src" "$W"
	rm -rf "$W/stolen"
done
ln -sfn "$PROJECT" "$W/to-project"; ln -sfn "$VICTIM" "$W/to-victim"; ln -sfn "$KEEP" "$W/to-keep"; ln -sfn / "$W/to-root"
try sh -c 'echo x > "$1/to-project/new-$2"' sh "$W" "$MARKER"
try sh -c 'echo x > "$1/to-victim/new-$2"' sh "$W" "$MARKER"
try sh -c 'echo x >> "$1/to-keep"' sh "$W"
try sh -c 'echo x > "$1/to-root$2"' sh "$W" "$VFILE"
try mkdir "$W/to-victim/dir-$MARKER"
try mv "$W/d/f" "$W/to-project/moved-$MARKER"
try mv "$W/d/f" "$W/to-victim/moved-$MARKER"
try mv -T "$W/dd" "$W/to-victim/dir-$MARKER"
`+py(`
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT_FDCWD, RENAME_NOREPLACE, RENAME_EXCHANGE = -100, 1, 2
W = E["W"]
src = W + "/d/f"
for dst in [E["KEEP"], E["VFILE"], E["PROJECT"] + "/src/main.c", E["PROJECT"] + "/src", E["VICTIM"] + "/sub"]:
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), RENAME_EXCHANGE) == 0:
        escaped("renameat2 RENAME_EXCHANGE of the writable directory's file with " + dst)
    if libc.renameat2(AT_FDCWD, (W + "/dd").encode(), AT_FDCWD, dst.encode(), RENAME_EXCHANGE) == 0:
        escaped("renameat2 RENAME_EXCHANGE of the writable directory's directory with " + dst)
    attempt("rename over " + dst, os.rename, src, dst)
for dst in [E["PROJECT"] + "/new-" + E["MARKER"], E["VICTIM"] + "/new-" + E["MARKER"]]:
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), RENAME_NOREPLACE) == 0:
        escaped("renameat2 of the writable directory's file to " + dst)
    attempt("link to " + dst, os.link, src, dst)
for p in [E["KEEP"], E["VFILE"]]:
    fd = os.open(p, os.O_RDONLY)
    # linkat(AT_SYMLINK_FOLLOW) of a read-only descriptor into the writable directory
    attempt("link " + p + " into the writable directory through /proc/self/fd", os.link, "/proc/self/fd/%d" % fd, W + "/through-fd")
    os.close(fd)
    try:
        os.unlink(W + "/through-fd")
    except OSError:
        pass
`)+`
# the directory itself, emptied: it stays where the operator named it
try mv -T "$W" "$PROJECT/moved-$MARKER"
try mv -T "$W" "$VICTIM/moved-$MARKER"
find "$W" -mindepth 1 -delete
try rmdir "$W"
try mv -T "$W" "$PROJECT/moved-$MARKER"
# a set-uid program where other users of the host may run it: the
# server's uid's, never root's (checked below)
cp /bin/true "$W/suid" 2>/dev/null && chmod 6755 "$W/suid" 2>/dev/null
install -m 4755 /bin/true "$W/suid-install" 2>/dev/null
`+py(`
for name, mode in (("suid-open", 0o4755), ("sgid-open", 0o2755)):
    try:
        os.close(os.open(E["W"] + "/" + name, os.O_CREAT | os.O_WRONLY, mode))
    except OSError:
        pass
`), map[string]any{"env": map[string]any{"W": w}})
	if !strings.Contains(res.Stdout, "writable-ok") {
		t.Errorf("the writable directory took no write: the attack proves nothing\n%s", testkit.Tail(res.Stderr))
	}
	filepath.WalkDir(w, func(p string, d fs.DirEntry, err error) error {
		var st unix.Stat_t
		if err != nil || unix.Lstat(p, &st) != nil {
			return nil
		}
		if st.Mode&unix.S_ISUID != 0 && st.Uid == 0 || st.Mode&unix.S_ISGID != 0 && st.Gid == 0 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			fx.escape(t, "a set-uid or set-gid root program in the writable directory: %s (mode %o)", p, st.Mode)
		}
		return nil
	})
}

// The credentials a call gets in its jail and their host originals, and
// the places in the other session's jail that attacks aim at.
const (
	credentialFiles = `"$HOME/.gitconfig" "$HOME/.config/gh/hosts.yml" "$HOME/.codex/auth.json" \
	"$HOSTHOME/.gitconfig" "$HOSTHOME/.config/gh/hosts.yml" "$HOSTHOME/.codex/auth.json" \
	"$HOSTHOME/.codex/config.toml" "$HOSTHOME/.claude.json"`
	credentialDirs    = `"$HOME/.config/gh" "$HOSTHOME/.config/gh" "$HOSTHOME/.codex" "$HOSTHOME/.config" "$HOSTHOME"`
	otherSessionFiles = `"$OTHER/b-secret" "$OTHER/a-secret" "$OTHER/new-$MARKER" "$OTHER/.tmp/new-$MARKER" "$OTHER/.jail-mcp/new-$MARKER"`
)

// onOtherSession are the metadata attempts on the other session's jail,
// run both ways (bothWays) before the vector's own attack.
var onOtherSession = map[string]string{
	"chmod": "for f in " + otherSessionFiles + `; do
	try chmod 777 "$f"
done
try chmod 777 "$OTHER"
`,
	"utime": "for f in " + otherSessionFiles + `; do
	try touch -d 2000-01-01 "$f"
done
`,
}

// metadataThrough is the start of a metadata vector (chmod, chown, utime):
// its attempts through the ways the other vectors of promise 1 write by,
// which are here and not there so that those vectors hold on a backend
// that does not cover metadata (knownGaps). viaLink runs with $HOME/to-file
// and $HOME/to-dir symlinks to the victim, viaRoot per /proc/self/root
// form as $p, onCredential per credential file as $f, onCredentialDir per
// credential directory as $d; descriptor 7, open read-only on the victim
// file, is for the vector's Python part, which closes it. They run before
// the vector's own attempts: as a normal user on a backend that lets
// chmod through, those leave the targets unreachable.
func metadataThrough(viaLink, viaRoot, onCredential, onCredentialDir string) string {
	s := "exec 7<\"$VFILE\"\n"
	if viaLink != "" {
		s += `ln -sfn "$VFILE" "$HOME/to-file"; ln -sfn "$VICTIM" "$HOME/to-dir"` + viaLink
	}
	if viaRoot != "" {
		s += `for p in /proc/self/root /proc/thread-self/root "/proc/$$/root"; do` + viaRoot + "done\n"
	}
	if onCredential != "" {
		// A credential the sandbox hides (bubblewrap masks the host's
		// copies, --deny-read) is not there to change: touch -c of it
		// succeeds doing nothing. The host's state is checked after.
		s += "for f in " + credentialFiles + "; do\n\t{ [ -e \"$f\" ] || [ -L \"$f\" ]; } || continue" + onCredential + "done\n"
	}
	if onCredentialDir != "" {
		s += "for d in " + credentialDirs + "; do" + onCredentialDir + "done\n"
	}
	return s
}

// bothWays runs script as session a, whose $OTHER is b's jail (in the
// snapshot), then as session b, whose $OTHER is a's jail: a's file is
// checked here.
func (fx *escapeFixture) bothWays(t *testing.T, script string) {
	t.Helper()
	secret := filepath.Join(fx.jails["a"], "a-secret")
	testkit.StateOf(secret) // reading it sets its access time once
	before := map[string]testkit.Node{secret: testkit.StateOf(secret), fx.jails["a"]: testkit.StateOf(fx.jails["a"])}
	fx.attack(t, fx.a, script, nil)
	fx.checkHost(t) // what a did to b's jail, before b's own calls change it
	fx.attack(t, fx.b, script, nil)
	fx.ownCalls(t)
	if after := testkit.StateOf(secret); after != before[secret] {
		fx.escape(t, "session a's file changed: %+v -> %+v", before[secret], after)
	}
	if fx.gap != "" {
		fx.restore(before)
	}
}
