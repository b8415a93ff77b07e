package cache

import "sync/atomic"

// Callers is how many callers wait on id's flight now.
func (c *Cache[T]) Callers(id string) int {
	n, ok := c.callers.Load(c.key(id))
	if !ok {
		return 0
	}
	return int(n.(*atomic.Int32).Load())
}
