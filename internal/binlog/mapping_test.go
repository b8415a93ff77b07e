package binlog

import (
	"slices"
	"testing"

	"github.com/seckill/seckill/internal/shop"
)

func TestKeysOf(t *testing.T) {
	m := Mapping(shop.Keys{Prefix: "p:"})
	tests := []struct {
		name   string
		change Change
		want   []string
	}{
		{"ShopInsert", Change{Table: "tb_shop", After: map[string]any{"id": int64(7)}}, []string{"p:cache:shop:{7}"}},
		{"ShopUpdate", Change{Table: "tb_shop", Before: map[string]any{"id": int64(7)}, After: map[string]any{"id": int64(7)}}, []string{"p:cache:shop:{7}"}},
		{"ShopDelete", Change{Table: "tb_shop", Before: map[string]any{"id": uint64(8)}}, []string{"p:cache:shop:{8}"}},
		{"ShopIDChanged", Change{Table: "tb_shop", Before: map[string]any{"id": int64(1)}, After: map[string]any{"id": int64(2)}}, []string{"p:cache:shop:{1}", "p:cache:shop:{2}"}},
		{"ShopType", Change{Table: "tb_shop_type", After: map[string]any{"id": int64(3)}}, []string{"p:cache:shop-type"}},
		{"ShopWithoutID", Change{Table: "tb_shop", After: map[string]any{"id": nil}}, nil},
		{"VoucherIsNotFollowed", Change{Table: "tb_voucher", After: map[string]any{"id": int64(1), "shop_id": int64(1)}}, nil},
		{"UnfollowedTable", Change{Table: "tb_user", After: map[string]any{"id": int64(1)}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeysOf(m, tt.change); !slices.Equal(got, tt.want) {
				t.Fatalf("keys %v, want %v", got, tt.want)
			}
		})
	}
	if got := Tables(m); !slices.Equal(got, []string{"tb_shop", "tb_shop_type"}) {
		t.Fatalf("tables %v", got)
	}
}

func TestTraceInQuery(t *testing.T) {
	for _, tc := range []struct {
		query, trace, span string
	}{
		{query: "UPDATE tb_shop SET name = 'x' WHERE id = 1 /*traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'*/",
			trace: "0af7651916cd43dd8448eb211c80319c", span: "b7ad6b7169203331"},
		{query: "UPDATE tb_shop SET name = 'x' /*traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00',tracestate='a%3D1'*/",
			trace: "0af7651916cd43dd8448eb211c80319c", span: "b7ad6b7169203331"},
		{query: "UPDATE tb_shop SET name = 'x' WHERE id = 1"},
		{query: "UPDATE tb_shop SET name = 'traceparent=''00-zz'''"},
		{query: "/*traceparent='00-00000000000000000000000000000000-0000000000000000-01'*/ DELETE FROM tb_shop"},
	} {
		sc := TraceInQuery(tc.query)
		if tc.trace == "" {
			if sc.IsValid() {
				t.Errorf("%q names span %v", tc.query, sc)
			}
			continue
		}
		if sc.TraceID().String() != tc.trace || sc.SpanID().String() != tc.span {
			t.Errorf("%q: %s/%s, want %s/%s", tc.query, sc.TraceID(), sc.SpanID(), tc.trace, tc.span)
		}
	}
}
