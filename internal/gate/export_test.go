package gate

// SetBeforeRebuildScript lets a test act just before a rebuild's last step.
func SetBeforeRebuildScript(f func()) (restore func()) {
	beforeRebuildScript = f
	return func() { beforeRebuildScript = func() {} }
}
