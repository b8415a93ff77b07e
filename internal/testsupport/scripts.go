package testsupport

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScriptLog is a client hook that records the script commands the client
// sends (EVAL, EVALSHA, SCRIPT …) with their replies' errors. A test of the
// script cache asserts on what its own client sent: the cache itself is
// shared with every package testing on the same servers at the same time,
// which flush it and load into it as they go.
type ScriptLog struct {
	mu   sync.Mutex
	sent []ScriptCall
}

// ScriptCall is one script command as sent: its name ("evalsha",
// "script load") and whether Redis answered NOSCRIPT.
type ScriptCall struct {
	Name     string
	NoScript bool
}

// Calls are the commands recorded since the last Reset.
func (l *ScriptLog) Calls() []ScriptCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ScriptCall(nil), l.sent...)
}

// Reset forgets what was recorded.
func (l *ScriptLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = nil
}

// record takes each command's error from err when it is given: a
// command's own error may be set only after the hooks return.
func (l *ScriptLog) record(err error, cmds ...redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cmds {
		cmdErr := err
		if cmdErr == nil {
			cmdErr = c.Err()
		}
		name := c.Name()
		switch name {
		case "eval", "evalsha", "eval_ro", "evalsha_ro":
		case "script":
			if args := c.Args(); len(args) > 1 {
				if sub, ok := args[1].(string); ok {
					name += " " + strings.ToLower(sub)
				}
			}
		default:
			continue
		}
		l.sent = append(l.sent, ScriptCall{Name: name, NoScript: cmdErr != nil && strings.HasPrefix(cmdErr.Error(), "NOSCRIPT")})
	}
}

func (l *ScriptLog) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (l *ScriptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		l.record(err, cmd)
		return err
	}
}

func (l *ScriptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		l.record(nil, cmds...)
		return err
	}
}
