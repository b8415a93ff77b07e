package reconcile

// SetBeforeFreezeAll lets a test act while only the suspect part of a sale
// is frozen.
func SetBeforeFreezeAll(f func()) (restore func()) {
	beforeFreezeAll = f
	return func() { beforeFreezeAll = func() {} }
}
