package gate

// SetBeforeRebuildScript lets a test act just before a rebuild's last step.
func SetBeforeRebuildScript(f func()) (restore func()) {
	beforeRebuildScript = f
	return func() { beforeRebuildScript = func() {} }
}

// KeySlot is the cluster slot the store computes for a hash tag's content.
var KeySlot = keySlot

// SetAfterTake lets a test stop a mover between a transfer's two steps.
func SetAfterTake(f func() error) (restore func()) {
	afterTake = f
	return func() { afterTake = func() error { return nil } }
}
