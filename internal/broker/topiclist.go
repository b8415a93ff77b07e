package broker

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseTopicList reads a list of topics as deploy/topics writes them:
// name:partitions, one a line, with # comments and blank lines.
func ParseTopicList(r io.Reader) ([]Topic, error) {
	var topics []Topic
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		name, parts, ok := strings.Cut(line, ":")
		p, err := strconv.Atoi(parts)
		if !ok || name == "" || err != nil || p < 1 {
			return nil, fmt.Errorf("topic list, line %d: %q is not name:partitions", n, line)
		}
		if seen[name] {
			return nil, fmt.Errorf("topic list, line %d: %s is listed twice", n, name)
		}
		seen[name] = true
		topics = append(topics, Topic{Name: name, Partitions: p})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("topic list: %w", err)
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("topic list: no topic in it")
	}
	return topics, nil
}
