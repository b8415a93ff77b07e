package botcheck

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"math/rand/v2"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/gobolditalic"
	"golang.org/x/image/font/gofont/goitalic"
	"golang.org/x/image/font/gofont/gomedium"
	"golang.org/x/image/font/gofont/gomediumitalic"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/gomonobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// The picture is drawn here, not by the library whose audio the challenge
// keeps: its pictures are one fixed font's dots in one palette colour at a
// fixed stride, which a template matcher reads (BenchmarkPictureSolver).
// Each digit here gets its own typeface, size, turn, slant, width, colour
// and small bend; the digits overlap by chance, thin lines of the digits'
// colours cross them, and the whole is bent by a field no two pictures
// share. The library's glyphs match none of it; the typefaces' own glyphs
// match some (docs/bot-defence.md, "The attackers"). Stronger settings
// stopped templates better and people too: these are the ones a reader
// here got most of right.

var (
	fontsOnce sync.Once
	faces     []*opentype.Font
	fontsErr  error
)

func pictureFonts() ([]*opentype.Font, error) {
	fontsOnce.Do(func() {
		for _, ttf := range [][]byte{goregular.TTF, gomedium.TTF, gomediumitalic.TTF, gobold.TTF, gobolditalic.TTF, gomono.TTF, gomonobold.TTF, goitalic.TTF} {
			f, err := opentype.Parse(ttf)
			if err != nil {
				fontsErr = fmt.Errorf("challenge fonts: %w", err)
				return
			}
			faces = append(faces, f)
		}
	})
	return faces, fontsErr
}

// picture is a challenge's digits drawn as a PNG; seed makes it (a fresh
// random one per challenge).
func picture(seed [32]byte, digits []byte) ([]byte, error) {
	if len(digits) == 0 {
		return nil, fmt.Errorf("challenge picture: no digits")
	}
	fonts, err := pictureFonts()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewChaCha8(seed))
	between := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	inks := make([]color.RGBA, len(digits))
	for i := range inks {
		inks[i] = color.RGBA{uint8(rng.IntN(110)), uint8(rng.IntN(110)), uint8(rng.IntN(110)), 255}
	}
	canvas := image.NewRGBA(image.Rect(0, 0, imageWidth, imageHeight))
	paper := color.RGBA{uint8(205 + rng.IntN(50)), uint8(205 + rng.IntN(50)), uint8(205 + rng.IntN(50)), 255}
	draw.Draw(canvas, canvas.Bounds(), image.NewUniform(paper), image.Point{}, draw.Src)

	x := between(4, 10)
	for i, d := range digits {
		size := between(40, 48)
		face, err := opentype.NewFace(fonts[rng.IntN(len(fonts))], &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingNone})
		if err != nil {
			return nil, fmt.Errorf("challenge face: %w", err)
		}
		glyph := image.NewAlpha(image.Rect(0, 0, 64, 64))
		dr := font.Drawer{Dst: glyph, Src: image.Opaque, Face: face, Dot: fixed.P(14, 50)}
		dr.DrawString(string('0' + rune(d)))
		face.Close()
		angle := between(-0.3, 0.3)
		shear := between(-0.25, 0.25)
		y := between(-6, 6)
		stampWarped(canvas, glyph, x, y, angle, shear, between(0.85, 1.2), ripples(rng), inks[i])
		x += between(34, 37)
	}
	for range 2 {
		curve(canvas, rng, inks[rng.IntN(len(inks))], 0.4+rng.Float64()*0.3)
	}

	bent := bend(canvas, rng)
	speckle(bent, rng, inks)
	var out bytes.Buffer
	if err := png.Encode(&out, bent); err != nil {
		return nil, fmt.Errorf("challenge picture: %w", err)
	}
	return out.Bytes(), nil
}

// A ripple is one wave of a glyph's own small bend: its strokes move by
// up to amp pixels, in a pattern a few pixels across.
type ripple struct{ amp, kx, ky, phase float64 }

// ripples are a glyph's bend, two waves an axis: [0:2] move x, [2:4] y.
func ripples(rng *rand.Rand) []ripple {
	r := make([]ripple, 4)
	for i := range r {
		angle := rng.Float64() * 2 * math.Pi
		k := 2 * math.Pi / (14 + rng.Float64()*12)
		r[i] = ripple{amp: 0.5 + rng.Float64()*0.5, kx: k * math.Cos(angle), ky: k * math.Sin(angle), phase: rng.Float64() * 2 * math.Pi}
	}
	return r
}

func (r ripple) at(x, y float64) float64 { return r.amp * math.Sin(r.kx*x+r.ky*y+r.phase) }

// stampWarped is stamp with the glyph widened by aspect and bent by its
// ripples: a glyph no template of the typeface stays like.
func stampWarped(dst *image.RGBA, glyph *image.Alpha, x, y, angle, shear, aspect float64, bend []ripple, ink color.RGBA) {
	gb := glyph.Bounds()
	cx, cy := float64(gb.Dx())/2, float64(gb.Dy())/2
	sin, cos := math.Sin(angle), math.Cos(angle)
	for py := 0; py < gb.Dy(); py++ {
		for px := 0; px < gb.Dx(); px++ {
			// Where this output pixel comes from in the glyph.
			dx, dy := float64(px)-cx, float64(py)-cy
			if len(bend) == 4 {
				dx += bend[0].at(dx, dy) + bend[1].at(dx, dy)
				dy += bend[2].at(dx, dy) + bend[3].at(dx, dy)
			}
			dx /= aspect
			sx := cos*dx + sin*dy - shear*dy + cx
			sy := -sin*dx + cos*dy + cy
			a := glyph.AlphaAt(int(sx), int(sy)).A
			if a == 0 {
				continue
			}
			blend(dst, int(x)+px, int(y)+py, ink, a)
		}
	}
}

func blend(dst *image.RGBA, x, y int, ink color.RGBA, a uint8) {
	if !(image.Point{x, y}.In(dst.Bounds())) {
		return
	}
	c := dst.RGBAAt(x, y)
	mix := func(p, q uint8) uint8 { return uint8((int(p)*(255-int(a)) + int(q)*int(a)) / 255) }
	dst.SetRGBA(x, y, color.RGBA{mix(c.R, ink.R), mix(c.G, ink.G), mix(c.B, ink.B), 255})
}

// curve is a wavy stroke of half-width width across the picture.
func curve(dst *image.RGBA, rng *rand.Rand, ink color.RGBA, width float64) {
	y0 := 15 + rng.Float64()*50
	amp, period, phase := 4+rng.Float64()*14, 60+rng.Float64()*140, rng.Float64()*2*math.Pi
	slope := (rng.Float64() - 0.5) * 0.3
	from, to := rng.IntN(imageWidth/3), imageWidth-rng.IntN(imageWidth/3)
	for x := from; x < to; x++ {
		yc := y0 + slope*float64(x) + amp*math.Sin(2*math.Pi*float64(x)/period+phase)
		for y := int(yc - width); y <= int(yc+width); y++ {
			blend(dst, x, y, ink, 255)
		}
	}
}

// bend moves every pixel by a smooth field of three random waves in each
// direction.
func bend(src *image.RGBA, rng *rand.Rand) *image.RGBA {
	type wave struct{ amp, kx, ky, phase float64 }
	waves := func() []wave {
		w := make([]wave, 3)
		for i := range w {
			w[i] = wave{amp: 0.8 + rng.Float64()*1.2, kx: 2 * math.Pi / (40 + rng.Float64()*120),
				ky: 2 * math.Pi / (30 + rng.Float64()*90), phase: rng.Float64() * 2 * math.Pi}
		}
		return w
	}
	wx, wy := waves(), waves()
	field := func(ws []wave, x, y float64) float64 {
		var d float64
		for _, w := range ws {
			d += w.amp * math.Sin(w.kx*x+w.ky*y+w.phase)
		}
		return d
	}
	b := src.Bounds()
	dst := image.NewRGBA(b)
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			sx := x + int(field(wx, float64(x), float64(y)))
			sy := y + int(field(wy, float64(x), float64(y)))
			sx = min(max(sx, 0), b.Dx()-1)
			sy = min(max(sy, 0), b.Dy()-1)
			dst.SetRGBA(x, y, src.RGBAAt(sx, sy))
		}
	}
	return dst
}

// speckle scatters dots of the digits' inks and of lighter tones.
func speckle(dst *image.RGBA, rng *rand.Rand, inks []color.RGBA) {
	for range 350 {
		ink := inks[rng.IntN(len(inks))]
		a := uint8(80 + rng.IntN(176))
		blend(dst, rng.IntN(imageWidth), rng.IntN(imageHeight), ink, a)
	}
}
