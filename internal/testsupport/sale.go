package testsupport

import "testing"

// MustSeedVoucher inserts flash-sale voucher id with stock, on sale from
// now for a day, in the test's database.
func (m *MySQL) MustSeedVoucher(tb testing.TB, id, stock int64) {
	tb.Helper()
	m.MustSeedVoucherIn(tb, id, stock, 1)
}

// MustSeedVoucherIn is MustSeedVoucher for a sale in buckets stock buckets.
func (m *MySQL) MustSeedVoucherIn(tb testing.TB, id, stock int64, buckets int) {
	tb.Helper()
	if _, err := m.DB.Exec("INSERT INTO tb_voucher (id, shop_id, title, pay_value, actual_value, type) VALUES (?, 1, 'v', 100, 200, 1)", id); err != nil {
		tb.Fatal(err)
	}
	if _, err := m.DB.Exec(`INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time, stock_buckets)
		VALUES (?, ?, NOW(), NOW() + INTERVAL 1 DAY, ?)`, id, stock, buckets); err != nil {
		tb.Fatal(err)
	}
}

// SaleState is a voucher's rows in MySQL.
type SaleState struct{ Orders, Failures, Stock int64 }

// MustSaleState counts voucher's orders and failures and reads its stock.
func (m *MySQL) MustSaleState(tb testing.TB, voucher int64) SaleState {
	tb.Helper()
	var c SaleState
	err := m.DB.QueryRow(`SELECT (SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?),
		(SELECT COUNT(*) FROM tb_voucher_order_failure WHERE voucher_id = ?),
		(SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?)`, voucher, voucher, voucher).Scan(&c.Orders, &c.Failures, &c.Stock)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
