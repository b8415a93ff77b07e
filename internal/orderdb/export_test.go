package orderdb

// SetAfterFirstTruthRead lets a test commit between SaleTruth's reads.
func SetAfterFirstTruthRead(f func()) func() {
	afterFirstTruthRead = f
	return func() { afterFirstTruthRead = func() {} }
}
