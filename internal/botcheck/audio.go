package botcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/dchest/captcha"
)

// The reading is the library's (its recordings are the only voices it
// has), bent per reading where its own variation is not enough: it only
// speeds each recording up or down and changes its volume, so the ten
// public recordings, matched at a few speeds, read its digits
// (BenchmarkAudioSolver). Here the tape's speed wobbles, every frequency
// is moved by an amount that wanders as the reading plays, and a sweeping
// echo carves notches that move across the spectrum: no recording at any
// one speed or pitch stays like the digit for its whole length. The
// flanger alone, or with the wobble, left the solver 15 % of the readings,
// with the shift 2 %; all three, with the shift never near zero, none of
// 1,000 (about a fifth of the digits).
const (
	wavHeader = 44
	wavRate   = 8000
	// The frequency shift wanders between minShift and maxShift (up or
	// down, one way a reading), to a new aim every shiftEvery.
	minShift   = 90.0  // Hz
	maxShift   = 250.0 // Hz
	shiftEvery = 0.18  // s
	// The speed wobbles by up to wobbleDepth, at 1.5 to 3.5 Hz.
	wobbleDepth = 0.10
	// The flanger's delay sweeps between 0.5 and 6 ms, 0.84 to 1.56
	// times a second; its echo is nearly as loud as the voice.
	flangeRate     = 1.2 // Hz
	flangeGain     = 0.9
	flangeMinDelay = 0.0005 // s
	flangeMaxDelay = 0.006  // s
)

// reading is a challenge's digits read aloud in lang, as a WAV; seed makes
// the bending (a fresh random one per reading).
func reading(seed [32]byte, id string, digits []byte, lang string) ([]byte, error) {
	var wav bytes.Buffer
	if _, err := captcha.NewAudio(id, digits, lang).WriteTo(&wav); err != nil {
		return nil, fmt.Errorf("challenge audio: %w", err)
	}
	raw := wav.Bytes()
	if len(raw) <= wavHeader || binary.LittleEndian.Uint32(raw[24:]) != wavRate || binary.LittleEndian.Uint16(raw[34:]) != 8 {
		return nil, fmt.Errorf("challenge audio: not the 8 kHz 8-bit WAV the library made")
	}
	// The data chunk's own length: the library pads an odd one with a
	// byte that is not a sample.
	body := raw[wavHeader:]
	if n := int(binary.LittleEndian.Uint32(raw[40:])); n <= len(body) {
		body = body[:n]
	}
	rng := rand.New(rand.NewChaCha8(seed))
	x := make([]float64, len(body))
	for i, v := range body {
		x[i] = float64(int(v) - 128)
	}
	y := flange(shift(wobble(x, rng), rng), rng)
	out := make([]byte, wavHeader, wavHeader+len(y)+1)
	copy(out, raw[:wavHeader])
	for _, v := range y {
		out = append(out, byte(min(max(math.Round(v)+128, 0), 255)))
	}
	binary.LittleEndian.PutUint32(out[40:], uint32(len(y)))
	if len(y)%2 == 1 {
		out = append(out, 0)
	}
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out, nil
}

// wobble plays x back at a speed that swings around 1 by two slow waves.
func wobble(x []float64, rng *rand.Rand) []float64 {
	f1, f2 := 1.5+rng.Float64()*2, 1.5+rng.Float64()*2
	p1, p2 := rng.Float64()*2*math.Pi, rng.Float64()*2*math.Pi
	d1 := wobbleDepth * (0.5 + rng.Float64()*0.5)
	d2 := wobbleDepth - d1
	out := make([]float64, 0, len(x)+len(x)/8)
	for pos, t := 0.0, 0.0; pos < float64(len(x)-1); t += 1.0 / wavRate {
		i := int(pos)
		frac := pos - float64(i)
		out = append(out, x[i]*(1-frac)+x[i+1]*frac)
		pos += 1 + d1*math.Sin(2*math.Pi*f1*t+p1) + d2*math.Sin(2*math.Pi*f2*t+p2)
	}
	return out
}

// shift moves every frequency of x by a wandering amount: the analytic
// signal (x beside its Hilbert transform) turned by the shift's phase.
// The transform is a windowed FIR filter: a few milliseconds of CPU a
// reading, where one Fourier transform of the whole reading took tens.
func shift(x []float64, rng *rand.Rand) []float64 {
	hilbert := hilbertTaps()
	half := len(hilbert) / 2
	quad := make([]float64, len(x))
	for i := range x {
		var v float64
		for k := 1; k <= half; k += 2 {
			var earlier, later float64
			if i-k >= 0 {
				earlier = x[i-k]
			}
			if i+k < len(x) {
				later = x[i+k]
			}
			v += hilbert[half+k] * (earlier - later)
		}
		quad[i] = v
	}
	out := make([]float64, len(x))
	// One direction a reading, so that the shift never rests near zero,
	// where the recordings match again.
	sign := float64(1 - 2*rng.IntN(2))
	draw := func() float64 { return sign * (minShift + rng.Float64()*(maxShift-minShift)) }
	hz := draw()
	aim := hz
	step := int(shiftEvery * wavRate)
	var phase float64
	for i := range out {
		if i%step == 0 {
			aim = draw()
		}
		hz += (aim - hz) / float64(step) * 2
		phase += 2 * math.Pi * hz / wavRate
		s, co := math.Sincos(phase)
		out[i] = x[i]*co - quad[i]*s
	}
	return out
}

// flange adds x to itself a sweeping few milliseconds later: notches
// that sweep across the spectrum, a jet's whoosh over the voice.
func flange(x []float64, rng *rand.Rand) []float64 {
	rate := flangeRate * (0.7 + rng.Float64()*0.6)
	phase := rng.Float64() * 2 * math.Pi
	gain := flangeGain * (0.8 + rng.Float64()*0.2)
	out := make([]float64, len(x))
	for i := range x {
		t := float64(i) / wavRate
		delay := (flangeMinDelay + (flangeMaxDelay-flangeMinDelay)*(0.5+0.5*math.Sin(2*math.Pi*rate*t+phase))) * wavRate
		j := float64(i) - delay
		var late float64
		if k := int(j); k >= 0 {
			frac := j - float64(k)
			late = x[k]*(1-frac) + x[min(k+1, len(x)-1)]*frac
		}
		out[i] = (x[i] + gain*late) / (1 + gain) * 1.3
	}
	return out
}

// hilbertTaps is a Hilbert transformer of 2*64+1 taps, Blackman-windowed:
// 2/(πk) at odd k, 0 at even; flat from about 150 Hz to 3.9 kHz at 8 kHz.
var hilbertTaps = sync.OnceValue(func() []float64 {
	const half = 64
	taps := make([]float64, 2*half+1)
	for k := 1; k <= half; k += 2 {
		w := 0.42 + 0.5*math.Cos(math.Pi*float64(k)/half) + 0.08*math.Cos(2*math.Pi*float64(k)/half)
		taps[half+k] = 2 / (math.Pi * float64(k)) * w
		taps[half-k] = -taps[half+k]
	}
	return taps
})
