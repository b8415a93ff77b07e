package botcheck

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/dchest/captcha"
)

// A solver reads a challenge's digits from what the api serves (made from
// a fresh id and seed), or from the library's own output.
type solver func(t testing.TB, id string, seed [32]byte, digits []byte) []byte

func audioServed(s *audioSolver) solver {
	return func(t testing.TB, id string, seed [32]byte, digits []byte) []byte {
		wav, err := reading(seed, id, digits, "en")
		if err != nil {
			t.Fatal(err)
		}
		return s.solve(wav, len(digits))
	}
}

func audioLibrary(s *audioSolver) solver {
	return func(t testing.TB, id string, _ [32]byte, digits []byte) []byte {
		var wav bytes.Buffer
		if _, err := captcha.NewAudio(id, digits, "en").WriteTo(&wav); err != nil {
			t.Fatal(err)
		}
		return s.solve(wav.Bytes(), len(digits))
	}
}

func pictureServed(s *pictureSolver) solver {
	return func(t testing.TB, _ string, seed [32]byte, digits []byte) []byte {
		png, err := picture(seed, digits)
		if err != nil {
			t.Fatal(err)
		}
		return s.solve(png, len(digits))
	}
}

func pictureFontsServed(s *fontSolver) solver {
	return func(t testing.TB, _ string, seed [32]byte, digits []byte) []byte {
		png, err := picture(seed, digits)
		if err != nil {
			t.Fatal(err)
		}
		return s.solve(png, len(digits))
	}
}

func pictureLibrary(s *pictureSolver) solver {
	return func(t testing.TB, id string, _ [32]byte, digits []byte) []byte {
		var png bytes.Buffer
		if _, err := captcha.NewImage(id, digits, imageWidth, imageHeight).WriteTo(&png); err != nil {
			t.Fatal(err)
		}
		return s.solve(png.Bytes(), len(digits))
	}
}

// try runs solve on one fresh challenge: whether it read it whole, and
// how many of its digits it read in their places.
func try(t testing.TB, solve solver) (whole bool, right int) {
	digits := captcha.RandomDigits(DefaultConfig.Digits)
	raw := make([]byte, 16)
	var seed [32]byte
	rand.Read(raw)
	rand.Read(seed[:])
	got := solve(t, string(raw), seed, digits)
	for i := range got {
		if i < len(digits) && got[i] == digits[i] {
			right++
		}
	}
	return string(got) == string(digits), right
}

// The attackers read under 1 % of 1,000 challenges each, picture and
// reading, as the api serves them. First, so that a broken attacker
// cannot pass, each must read 15 of 100 of the library's own (it
// reads most: make bench, BenchmarkAudioSolver, BenchmarkPictureSolver).
func TestSolversReadUnderOnePercent(t *testing.T) {
	const challenges = 1000
	const bound = challenges / 100
	audio, pictures := newAudioSolver("en"), newPictureSolver()
	for name, solve := range map[string][2]solver{
		"audio":   {audioServed(audio), audioLibrary(audio)},
		"picture": {pictureServed(pictures), pictureLibrary(pictures)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			control := 0
			for range 100 {
				if whole, _ := try(t, solve[1]); whole {
					control++
				}
			}
			if control < 15 {
				t.Fatalf("the %s solver read %d of 100 of the library's own challenges: want 15 or more, or it tests nothing", name, control)
			}
			solved, right := 0, 0
			for range challenges {
				whole, r := try(t, solve[0])
				right += r
				if whole {
					solved++
				}
			}
			t.Logf("%s: %d of 100 of the library's challenges read whole; %d of %d served, %.1f %% of the digits", name, control, solved, challenges,
				100*float64(right)/float64(challenges*DefaultConfig.Digits))
			if solved >= bound {
				t.Errorf("the %s solver read %d of %d challenges: want under %d", name, solved, challenges, bound)
			}
		})
	}
}

// The solvers on the challenges served, and on the library's own output,
// which the picture replaced and the reading bends: the share each reads
// whole and the share of digits, a challenge an iteration. make bench
// runs 1,000 of each.
func BenchmarkAudioSolver(b *testing.B) {
	s := newAudioSolver("en")
	b.Run("served", func(b *testing.B) { benchmarkSolver(b, audioServed(s)) })
	b.Run("library", func(b *testing.B) { benchmarkSolver(b, audioLibrary(s)) })
}

func BenchmarkPictureSolver(b *testing.B) {
	s := newPictureSolver()
	b.Run("served", func(b *testing.B) { benchmarkSolver(b, pictureServed(s)) })
	b.Run("library", func(b *testing.B) { benchmarkSolver(b, pictureLibrary(s)) })
	b.Run("served, its fonts", func(b *testing.B) { benchmarkSolver(b, pictureFontsServed(newFontSolver(b))) })
}

func benchmarkSolver(b *testing.B, solve solver) {
	solved, right := 0, 0
	for b.Loop() {
		whole, r := try(b, solve)
		right += r
		if whole {
			solved++
		}
	}
	b.ReportMetric(100*float64(solved)/float64(b.N), "%solved")
	b.ReportMetric(100*float64(right)/float64(b.N*DefaultConfig.Digits), "%digits")
}
