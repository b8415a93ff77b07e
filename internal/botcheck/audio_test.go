package botcheck

import (
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/dchest/captcha"
)

// A reading is a WAV a browser plays: its chunk lengths agree with its
// bytes, whatever the language and however long the bending made it.
func TestReadingIsAWellFormedWAV(t *testing.T) {
	for _, lang := range Languages {
		for range 4 {
			var seed [32]byte
			rand.Read(seed[:])
			wav, err := reading(seed, string(captcha.RandomDigits(16)), captcha.RandomDigits(DefaultConfig.Digits), lang)
			if err != nil {
				t.Fatal(err)
			}
			data := int(binary.LittleEndian.Uint32(wav[40:]))
			if string(wav[0:4]) != "RIFF" || string(wav[8:12]) != "WAVE" || string(wav[36:40]) != "data" ||
				int(binary.LittleEndian.Uint32(wav[4:])) != len(wav)-8 || data+wavHeader+data%2 != len(wav) ||
				binary.LittleEndian.Uint32(wav[24:]) != wavRate || data < 5*wavRate {
				t.Fatalf("%s: a WAV of %d bytes, RIFF size %d, data %d, rate %d", lang, len(wav),
					binary.LittleEndian.Uint32(wav[4:]), data, binary.LittleEndian.Uint32(wav[24:]))
			}
		}
	}
}

func BenchmarkReading(b *testing.B) {
	var seed [32]byte
	for b.Loop() {
		if _, err := reading(seed, "bench", []byte{1, 2, 3, 4, 5, 6}, "en"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPicture(b *testing.B) {
	var seed [32]byte
	for b.Loop() {
		if _, err := picture(seed, []byte{1, 2, 3, 4, 5, 6}); err != nil {
			b.Fatal(err)
		}
	}
}
