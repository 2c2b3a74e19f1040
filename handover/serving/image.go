package serving

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// CheckImage refuses a binary a reexec must not start (docs/security.md
// "Re-exec"): path must be absolute and name a regular file that is
// executable, owned by root or by this process's user, and writable by
// neither its group nor others; so must every directory from it up to /
// (a sticky directory such as /tmp may be writable by others, since they
// cannot replace a file they do not own in it). Then only root or the
// daemon's own user can have put the file there. Symbolic links are
// followed; the file they lead to is what is checked.
func CheckImage(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("reexec image %q: not an absolute path", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("reexec image: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("reexec image: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("reexec image %s: not a regular file", real)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("reexec image %s: not executable", real)
	}
	if err := trusted(real, fi, false); err != nil {
		return err
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		di, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("reexec image: %w", err)
		}
		if err := trusted(dir, di, true); err != nil {
			return err
		}
		if dir == "/" {
			return nil
		}
	}
}

// trusted checks the owner and the write bits of one file or directory.
func trusted(name string, fi os.FileInfo, dir bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("reexec image: %s: no owner", name)
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("reexec image: %s is owned by uid %d, not by root or the daemon's user", name, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && !(dir && fi.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("reexec image: %s is writable by group or others (mode %04o)", name, fi.Mode().Perm())
	}
	return nil
}
