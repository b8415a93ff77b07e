package main

import (
	"slices"
	"testing"
)

func TestKafkaProperty(t *testing.T) {
	for name, want := range map[string]string{
		"KAFKA_NODE_ID":                          "node.id",
		"KAFKA_ADVERTISED_LISTENERS":             "advertised.listeners",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":   "listener.security.protocol.map",
		"KAFKA_LISTENER_NAME_CONTROLLER_SASL__X": "listener.name.controller.sasl_x",
		"KAFKA_SOME___HYPHENATED":                "some-hyphenated",
	} {
		if got := kafkaProperty(name); got != want {
			t.Errorf("kafkaProperty(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestStatements(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{"-- a comment\nCREATE DATABASE x;\n\nGRANT SELECT\n  ON *.* TO 'a'@'%';\n# another\nSELECT 1",
			[]string{"CREATE DATABASE x", "GRANT SELECT ON *.* TO 'a'@'%'", "SELECT 1"}},
		{"CREATE DATABASE x; -- the shop's\nSELECT 2; # two",
			[]string{"CREATE DATABASE x", "SELECT 2"}},
		{"SELECT '-- not a comment', \"# nor this\";\nSELECT 3-1;",
			[]string{"SELECT '-- not a comment', \"# nor this\"", "SELECT 3-1"}},
		{"SELECT 1 --1;", []string{"SELECT 1 --1"}},
		{`SELECT 'it\'s # not', "a \" -- b"; # c`, []string{`SELECT 'it\'s # not', "a \" -- b"`}},
		{"SELECT 1 AS `a\\`; # c", []string{"SELECT 1 AS `a\\`"}},
	} {
		if got := statements(c.sql); !slices.Equal(got, c.want) {
			t.Errorf("statements(%q) = %q, want %q", c.sql, got, c.want)
		}
	}
}
