//go:build !linux && !darwin

package jailfs

import "os"

// No backend confines here: jails are not locked.
func LockShared(*os.File) error { return nil }

func tryLockExclusive(*os.File) (bool, error) { return true, nil }

// ownedByMe: no owner to tell here; the registry is not used.
func ownedByMe(os.FileInfo) bool { return false }

// TryLockExclusive: nothing locks a jail here.
func TryLockExclusive(*os.File) (bool, error) { return true, nil }
