package binlog

import (
	"slices"

	"github.com/go-mysql-org/go-mysql/canal"

	"github.com/seckill/seckill/internal/shop"
)

// Change is one changed row as the mapping sees it: its table, and the
// column values before (update, delete) and after (insert, update).
type Change struct {
	Table         string
	Before, After map[string]any
}

// KeyFunc is the cache keys one image of a row of one table affects.
type KeyFunc func(row map[string]any) []string

// Mapping is the one table from changed rows to cache keys: the shop
// family's keys, as the shop package defines them. The voucher tables are
// not followed: nothing caches them (a voucher's stock changes with every
// order; the flash sale's Redis state is kept by its own write path).
func Mapping(keys shop.Keys) map[string]KeyFunc {
	return map[string]KeyFunc{
		"tb_shop": func(row map[string]any) []string {
			id, ok := rowID(row["id"])
			if !ok {
				return nil
			}
			return []string{keys.Shop(id)}
		},
		"tb_shop_type": func(map[string]any) []string { return []string{keys.Types()} },
	}
}

// rowID is an id column's value as canal decoded it.
func rowID(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case uint64:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// Tables are the tables the invalidator follows.
func Tables(m map[string]KeyFunc) []string {
	out := make([]string, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// KeysOf is every key a change affects: those of the row before and after
// (an update that moves a voucher to another shop touches both lists).
func KeysOf(m map[string]KeyFunc, c Change) []string {
	f, ok := m[c.Table]
	if !ok {
		return nil
	}
	var keys []string
	for _, row := range []map[string]any{c.Before, c.After} {
		if row != nil {
			for _, k := range f(row) {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// Changes splits a canal RowsEvent into one Change per row.
func Changes(e *canal.RowsEvent) []Change {
	row := func(values []any) map[string]any {
		m := make(map[string]any, len(e.Table.Columns))
		for i, col := range e.Table.Columns {
			if i < len(values) {
				m[col.Name] = values[i]
			}
		}
		return m
	}
	var out []Change
	switch e.Action {
	case canal.InsertAction:
		for _, r := range e.Rows {
			out = append(out, Change{Table: e.Table.Name, After: row(r)})
		}
	case canal.DeleteAction:
		for _, r := range e.Rows {
			out = append(out, Change{Table: e.Table.Name, Before: row(r)})
		}
	case canal.UpdateAction:
		for i := 0; i+1 < len(e.Rows); i += 2 {
			out = append(out, Change{Table: e.Table.Name, Before: row(e.Rows[i]), After: row(e.Rows[i+1])})
		}
	}
	return out
}
