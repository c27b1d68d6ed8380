//go:build !linux && !darwin

package session

import "os"

// No backend confines here: jails are not locked.
func lockShared(*os.File) error { return nil }

func tryLockExclusive(*os.File) (bool, error) { return true, nil }

// ownedByMe: no owner to tell here; the registry is not used.
func ownedByMe(os.FileInfo) bool { return false }
