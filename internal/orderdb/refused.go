package orderdb

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// refusals are the server errors about the data of a row: the same row is
// refused again on every try, so retrying its batch can only stall it. The
// numbers are the same on MySQL 8 and MariaDB 10.11 except the CHECK
// constraint's.
var refusals = map[uint16]string{
	1048: "column cannot be null",
	1264: "out of range value",
	1265: "data truncated",
	1292: "incorrect value (a date or time)",
	1366: "incorrect value (a number or string)",
	1406: "data too long",
	1451: "foreign key: row referenced",
	1452: "foreign key: no parent row",
	1690: "value out of range",
	3819: "check constraint violated (MySQL)",
	4025: "check constraint violated (MariaDB)",
}

// Refused reports whether err is the server refusing a row's data (a
// permanent error) rather than a failure of the connection or of
// concurrency (a lost connection, a deadlock, a lock wait, a read-only
// server), which the next try may not meet.
func Refused(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	_, ok := refusals[me.Number]
	return ok
}
