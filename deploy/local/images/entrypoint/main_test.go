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
	sql := "-- a comment\nCREATE DATABASE x;\n\nGRANT SELECT\n  ON *.* TO 'a'@'%';\n# another\nSELECT 1"
	want := []string{"CREATE DATABASE x", "GRANT SELECT ON *.* TO 'a'@'%'", "SELECT 1"}
	if got := statements(sql); !slices.Equal(got, want) {
		t.Fatalf("statements = %q, want %q", got, want)
	}
}
