package botcheck

import (
	"encoding/binary"
	"math"
	"math/cmplx"
	"sort"
	_ "unsafe" // go:linkname: the attacker reads the library's own recordings

	"gonum.org/v1/gonum/dsp/fourier"
)

// The attacker of the audio reading knows what the library's source says:
// the ten recordings each language's digits are read from, varied only in
// speed (0.9 to 1.2) and volume, at least a second apart, over a babble
// of reversed digits. It scores each place of the reading by its
// loudness and by how much its spectra look like a recording's at one of
// several speeds, takes the six best places a second apart, and reads
// each as the recording that matches best around it.

//go:linkname captchaDigitSounds github.com/dchest/captcha.digitSounds
var captchaDigitSounds map[string][][]byte

const (
	audioRate  = 8000
	frameLen   = 256 // 32 ms
	frameHop   = 80  // 10 ms
	bandCount  = 20
	minGapFrms = audioRate / frameHop // a second between digits
)

var attackSpeeds = []float64{0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2}

// template is one recording at one speed, as spectra: centred and scaled
// for a correlation.
type template struct {
	digit  byte
	frames [][]float64
}

type audioSolver struct{ templates []template }

func newAudioSolver(lang string) *audioSolver {
	s := &audioSolver{}
	for d, snd := range captchaDigitSounds[lang] {
		for _, speed := range attackSpeeds {
			f := spectra(pcm(stretch(snd, speed)))
			normalise(f)
			s.templates = append(s.templates, template{digit: byte(d), frames: f})
		}
	}
	return s
}

// solve reads a WAV's digits, n of them.
func (s *audioSolver) solve(wav []byte, n int) []byte {
	const header = 44
	if len(wav) <= header || binary.LittleEndian.Uint32(wav[24:]) != audioRate {
		return nil
	}
	sig := spectra(pcm(wav[header:]))
	// Where: the n stretches a second apart that look most like a
	// recording and are loud (the digits are read louder than the babble
	// under them).
	const span = 28 // frames: a recording's length at speed 1
	energy := make([]float64, len(sig))
	for i := range sig {
		for j := i; j < i+span && j < len(sig); j++ {
			for _, v := range sig[j] {
				energy[i] += v * v
			}
		}
	}
	// The quieter half is the babble alone: no need to match there.
	sorted := append([]float64(nil), energy...)
	sort.Float64s(sorted)
	quiet := sorted[len(sorted)/2]
	windowed := make([]float64, len(sig))
	for i, e := range energy {
		if e > quiet {
			windowed[i] = math.Pow(e, locateEnergyPow) * math.Max(s.likeness(sig, i), 0)
		}
	}
	order := make([]int, len(sig))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return windowed[order[a]] > windowed[order[b]] })
	var at []int
	for _, i := range order {
		if len(at) == n {
			break
		}
		clash := false
		for _, a := range at {
			if i > a-span-minGapFrms/2 && i < a+span+minGapFrms/2 {
				clash = true
				break
			}
		}
		if !clash {
			at = append(at, i)
		}
	}
	sort.Ints(at)
	// What: the best template near each.
	digits := make([]byte, len(at))
	for k, a := range at {
		best := math.Inf(-1)
		for _, t := range s.templates {
			L := len(t.frames)
			for o := max(a-span/2, 0); o <= a+span/2 && o+L <= len(sig); o++ {
				if score, ok := t.correlation(sig, o); ok && score > best {
					best, digits[k] = score, t.digit
				}
			}
		}
	}
	return digits
}

// locateEnergyPow weighs loudness against likeness in finding the
// digits: 0.5 found more than 0, 1 or 2 on challenges with known places.
const locateEnergyPow = 0.5

// likeness is the best correlation of any template starting at frame at.
func (s *audioSolver) likeness(sig [][]float64, at int) float64 {
	best := 0.0
	for _, t := range s.templates {
		if at+len(t.frames) > len(sig) {
			continue
		}
		if score, ok := t.correlation(sig, at); ok {
			best = math.Max(best, score)
		}
	}
	return best
}

// correlation is the template's correlation with sig's frames from at:
// ok is false where those are flat.
func (t template) correlation(sig [][]float64, at int) (float64, bool) {
	var dot, sum, sq float64
	for i, tf := range t.frames {
		sf := sig[at+i]
		for b, v := range tf {
			dot += v * sf[b]
			sum += sf[b]
			sq += sf[b] * sf[b]
		}
	}
	varS := sq - sum*sum/float64(len(t.frames)*bandCount)
	if varS <= 0 {
		return 0, false
	}
	return dot / math.Sqrt(varS), true
}

// stretch is the library's change of speed.
func stretch(a []byte, speed float64) []byte {
	b := make([]byte, int(math.Floor(float64(len(a))*speed)))
	var p float64
	for _, v := range a {
		for i := int(p); i < int(p+speed); i++ {
			b[i] = v
		}
		p += speed
	}
	return b
}

func pcm(b []byte) []float64 {
	f := make([]float64, len(b))
	for i, v := range b {
		f[i] = float64(int(v)-128) / 128
	}
	return f
}

// spectra is the magnitude of bandCount bands from 150 Hz to 3.8 kHz,
// a frame every 10 ms.
func spectra(x []float64) [][]float64 {
	var out [][]float64
	window := make([]float64, frameLen)
	for i := range window {
		window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/frameLen)
	}
	edges := make([]int, bandCount+1)
	for i := range edges {
		hz := 150 * math.Pow(3800.0/150, float64(i)/bandCount)
		edges[i] = int(hz / (audioRate / frameLen))
	}
	t := fourier.NewFFT(frameLen)
	in := make([]float64, frameLen)
	buf := make([]complex128, frameLen/2+1)
	for at := 0; at+frameLen <= len(x); at += frameHop {
		for i := range in {
			in[i] = x[at+i] * window[i]
		}
		t.Coefficients(buf, in)
		f := make([]float64, bandCount)
		for b := range f {
			var e float64
			for k := edges[b]; k <= edges[b+1] && k <= frameLen/2; k++ {
				a := cmplx.Abs(buf[k])
				e += a * a
			}
			f[b] = math.Sqrt(e)
		}
		out = append(out, f)
	}
	return out
}

// normalise centres a template and scales it to unit length.
func normalise(f [][]float64) {
	var sum, n float64
	for _, fr := range f {
		for _, v := range fr {
			sum += v
			n++
		}
	}
	mean := sum / n
	var sq float64
	for _, fr := range f {
		for b := range fr {
			fr[b] -= mean
			sq += fr[b] * fr[b]
		}
	}
	norm := math.Sqrt(sq)
	for _, fr := range f {
		for b := range fr {
			fr[b] /= norm
		}
	}
}
